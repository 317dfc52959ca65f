# nova-scheduler-rs built from the repository (docker-compose.yml 'scheduler'; also a
# production image: mount nova.conf at /etc/nova/nova.conf).
#
#   docker build -f scripts/docker/daemon.Dockerfile \
#       --build-arg NSRS_GIT_COMMIT="$(git rev-parse --short HEAD)" -t nova-scheduler-rs .
#   docker run --network host -v /etc/nova:/etc/nova:ro nova-scheduler-rs
#
# .git is not in the build context: without NSRS_GIT_COMMIT, `--version` and the
# build_info metric say commit "unknown".
#
# It runs as the unprivileged user nova. Its health check asks /healthz on the
# listener that OS_NOVA_SCHEDULER_RS__HTTP_LISTEN turns on (oslo.config reads
# OS_<GROUP>__<OPTION> from the environment, over the files); change that variable to
# move the listener, and the check follows it. /var/lib/nova-scheduler-rs (state_dir)
# should be a volume so the record of requests in flight survives a new container.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# Read by build.rs (empty: "unknown"); declared after COPY so the layers above stay cached.
ARG NSRS_GIT_COMMIT=
# The dist profile: release, stripped.
RUN cargo build --profile dist --locked --bin nova-scheduler-rs

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system nova \
 && useradd --system --gid nova --home-dir /var/lib/nova --no-create-home \
        --shell /usr/sbin/nologin nova \
 && install -d -o nova -g nova -m 0750 /var/lib/nova-scheduler-rs
COPY --from=build /src/target/dist/nova-scheduler-rs /usr/local/bin/nova-scheduler-rs
COPY config/nova.conf.sample /usr/share/doc/nova-scheduler-rs/nova.conf.sample
USER nova
VOLUME ["/var/lib/nova-scheduler-rs"]
ENV OS_NOVA_SCHEDULER_RS__HTTP_LISTEN=127.0.0.1:9780
# Live: the event loop answers. (/readyz, for a load balancer or an orchestrator's
# readiness probe, also needs the broker and fresh caches.)
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD curl -fsS "http://${OS_NOVA_SCHEDULER_RS__HTTP_LISTEN}/healthz" >/dev/null || exit 1
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/nova-scheduler-rs"]
CMD ["--config-file", "/etc/nova/nova.conf"]
