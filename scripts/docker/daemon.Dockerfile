# nova-scheduler-rs built from the repository (docker-compose.yml 'scheduler').
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin nova-scheduler-rs

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/nova-scheduler-rs /usr/local/bin/nova-scheduler-rs
ENTRYPOINT ["/usr/local/bin/nova-scheduler-rs"]
