# One image for the extender replicas and the compose test runner.
FROM python:3.11-slim
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends redis-server \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md ./
COPY app ./app
COPY extenders ./extenders
RUN pip install --no-cache-dir -e '.[dev]'
COPY . .
EXPOSE 8888
CMD ["python", "-m", "app", "--host", "0.0.0.0", "--port", "8888"]
