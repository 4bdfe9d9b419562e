# The extender's image. Targets:
#   runtime (the default): the package and its runtime dependencies only, as a non-root user; runs with a
#     read-only root filesystem (it writes nothing; give it a tmpfs on /tmp if a kubeconfig embeds its
#     certificates as *-data, which the client library writes out as files).
#   tests: the runtime plus the dev extras, devstack/, tests/ and deploy/, for the compose stack's
#     test runner and set-up services.
# Every Python package comes at the exact version of requirements.lock (scripts/lock.sh).
ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS deps
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_CONSTRAINT=/src/requirements.lock
WORKDIR /src
# A venv without pip or setuptools of its own (the image's pip installs into it): nothing in the
# runtime image but what the extender runs.
RUN python -m venv --without-pip /opt/venv
COPY requirements.lock pyproject.toml ./
# Dependencies in layers of their own, rebuilt only when pyproject.toml or the lock change.
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/runtime.txt \
    && python -m pip --python /opt/venv/bin/python install -r /tmp/runtime.txt

FROM deps AS dev-deps
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['dev']))" \
        > /tmp/dev.txt \
    && python -m pip --python /opt/venv/bin/python install -r /tmp/dev.txt

FROM deps AS build
COPY README.md ./
COPY app ./app
COPY extenders ./extenders
RUN python -m pip --python /opt/venv/bin/python install --no-deps .

FROM dev-deps AS build-tests
COPY README.md ./
COPY app ./app
COPY extenders ./extenders
RUN python -m pip --python /opt/venv/bin/python install --no-deps .

FROM ${PYTHON_IMAGE} AS tests
RUN useradd --uid 10001 --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin extender
COPY --from=build-tests /opt/venv /opt/venv
# /src is read-only to the user: hypothesis (a dev extra's pytest plugin) keeps its examples in /tmp.
ENV PATH=/opt/venv/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 HYPOTHESIS_STORAGE_DIRECTORY=/tmp/hypothesis
WORKDIR /src
COPY pyproject.toml ./
COPY devstack ./devstack
COPY deploy ./deploy
COPY tests ./tests
USER 10001:10001
CMD ["python", "-m", "pytest", "-p", "no:cacheprovider", "-v", "tests/compose/stack_scenarios.py"]

FROM ${PYTHON_IMAGE} AS runtime
RUN useradd --uid 10001 --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin extender
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
USER 10001:10001
EXPOSE 8888
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 CMD ["python", "-m", "app.healthcheck"]
CMD ["python", "-m", "app", "--host", "0.0.0.0", "--port", "8888"]
