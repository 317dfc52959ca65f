# The Python side of the test stack (nova 34, Placement 16, pytest) with the
# pinned set from requirements/python.txt: used by docker-compose.yml for the
# 'stack' and 'conformance' services. Same venv as scripts/stack.sh builds.
FROM python:3.11-slim-bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends mariadb-client \
 && rm -rf /var/lib/apt/lists/*
COPY requirements/python.txt /tmp/python.txt
RUN python -m venv /opt/nsrs-venv \
 && /opt/nsrs-venv/bin/pip install --no-cache-dir --no-deps -r /tmp/python.txt \
 && /opt/nsrs-venv/bin/pip check \
 && date -u +%FT%TZ > /opt/nsrs-venv/.nsrs-complete
WORKDIR /src
COPY requirements requirements
COPY scripts scripts
COPY tests/conformance tests/conformance
ENV NSRS_VENV=/opt/nsrs-venv NSRS_SERVICES=external NSRS_STATE=/stack
