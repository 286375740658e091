# syntax=docker/dockerfile:1
#
# The lab's image: the official Apache Spark image (same Spark as the pinned
# pyspark) + a CPython that the lab's pins install on + the lab itself.
# docker-compose.yml runs it twice over: as the JupyterLab container (the Spark
# driver, the supervisor, the producer) and as both Spark workers (the
# executors and their Python workers), so the driver and the executors have the
# same Python, the same packages and the same `lab` code.
#
# Why not the image's own python3: apache/spark 4.x is built FROM
# eclipse-temurin:17-jammy (Ubuntu 22.04), whose python3 is 3.10.12. That meets
# neither pyproject's requires-python (>=3.11) nor the pins: numpy==2.3.5 needs
# Python >= 3.11, and Ubuntu 22.04's own python3.11 is a universe package, 3.11.0,
# outside Ubuntu's security support. So uv (from PyPI) installs a pinned CPython
# 3.11 (python-build-standalone, needs glibc >= 2.17),
# and the lab goes into a venv made from it. The image's python3 only installs uv.
#
# The pinned jars of lab/jars.json (Spark's and Flink's Kafka connectors, Apache Kafka's broker,
# Apache Storm, Apache Samza and the compiler of their Java) are fetched and verified here, at build time, into LAB_CACHE_DIR: a driver (re)start never
# downloads, and the containers need no internet for them.
#
# Build: docker compose build   (LAB_UID=$(id -u) to match the owner of ./notebooks;
#        LAB_MAVEN_REPO=https://mirror/maven2/ to fetch the jars from a Maven mirror)
FROM apache/spark:4.3.0-scala2.13-java17-python3-ubuntu

USER root

# uv and the CPython it installs (both pinned; uv 0.13.9 ships the metadata for 3.11.18).
ARG UV_VERSION=0.13.9
ARG LAB_PYTHON=3.11.18
# The user the lab runs as (the same in JupyterLab and in the workers). 185 is the
# image's own `spark` user; pass your uid on Linux so ./notebooks stays writable.
ARG LAB_UID=185

ENV UV_PYTHON_INSTALL_DIR=/opt/lab/python \
    UV_NO_CACHE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN set -eux; \
    python3 -m pip install --no-cache-dir "uv==${UV_VERSION}"; \
    uv python install --no-bin "${LAB_PYTHON}"; \
    "$(uv python find --managed-python --no-project "${LAB_PYTHON}")" -m venv /opt/lab/venv; \
    /opt/lab/venv/bin/python -m pip install --upgrade "pip==26.3" "setuptools==84.2.1" "wheel==0.48.0"; \
    /opt/lab/venv/bin/python -c 'import sys; v = sys.version_info; assert v[:2] == (3, 11) and v >= (3, 11, 5), sys.version'

# Only what `pip install -e .` needs (docker/jupyter.Dockerfile.dockerignore keeps .venv, runs/ etc. out).
WORKDIR /opt/lab
COPY pyproject.toml constraints.txt README.md ./
COPY lab ./lab

# The lab, every package pinned by constraints.txt, exactly as `make venv` installs it, without the two the
# Makefile names in UNUSED (1 s of Lark grammar at every import of nbformat, for IRI checks nothing here makes).
# Editable, so lab/templates/ and the project root (default runs dir) are where the code expects them.
RUN set -eux; \
    /opt/lab/venv/bin/python -m pip install -c constraints.txt -e .; \
    /opt/lab/venv/bin/python -m pip uninstall --yes rfc3987-syntax lark; \
    spark_pip="$(/opt/lab/venv/bin/python -c 'import pyspark; print(pyspark.__version__)')"; \
    grep -q "^Spark ${spark_pip} " /opt/spark/RELEASE \
      || { echo "pyspark ${spark_pip} does not match the image's Spark: $(head -1 /opt/spark/RELEASE)" >&2; exit 1; }; \
    /opt/lab/venv/bin/python -c 'import lab.spark.session, lab.sinks.reader, lab.spark.kafka_source, kafka, psycopg, pyarrow, jupyterlab'

# Every jar set of lab/jars.json (the copy just installed), each jar checked against its pinned
# SHA-1, then the Storm topology and the Samza job compiled (lab/host/java_build.py) and the class archives of the driver and broker
# JVMs for this image's Java, Spark and Kafka
# (lab/spark/archive.py, lab/broker/archive.py). lab.host.jars.cache_dir() reads LAB_CACHE_DIR at run time too, so the driver finds the
# connector here (lab.spark.session puts it in spark.jars; the executors get it from the driver).
# Route https: the image has no mvn. It is urllib, so OpenSSL needs a CA bundle: the standalone
# CPython may look elsewhere than Ubuntu's, hence SSL_CERT_FILE. Owned by root and read-only
# for the lab's user: nothing at run time rewrites it (should its .verified.json not match the
# files' inodes at run time, each check hashes the jars instead: 10 MB for the connector).
# LAB_MAVEN_REPO: a Maven 2 repository to fetch from instead of Maven Central (empty: Central).
# Then the flink pipeline's own environment (PyFlink 2.2.0 pins what the lab's venv cannot share; lab/flink/env.py),
# as `make flink` makes it, into the same cache: without it notebook 08's Flink runs stop at their first cell.
ARG LAB_MAVEN_REPO
ENV LAB_CACHE_DIR=/opt/lab/cache
RUN set -eux; \
    test -s /etc/ssl/certs/ca-certificates.crt \
      || { echo "no CA bundle at /etc/ssl/certs/ca-certificates.crt (package ca-certificates)" >&2; exit 1; }; \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt /opt/lab/venv/bin/lab fetch --route https; \
    /opt/lab/venv/bin/python -m lab.flink.env; \
    chmod -R a+rX "${LAB_CACHE_DIR}"

# The user, and the directories compose mounts: runs/ (checkpoints, WAL, sink files, shared
# with the workers through a named volume), home/ (Jupyter's runtime files), notebooks/
# (bind-mounted). A new named volume takes the mode of its mount point, so runs/ and home/
# are writable whatever LAB_UID is.
RUN set -eux; \
    getent passwd "${LAB_UID}" >/dev/null || useradd --system --uid "${LAB_UID}" --gid spark \
      --home-dir /opt/lab/home --no-create-home --shell /bin/bash lab; \
    mkdir -p /opt/lab/runs /opt/lab/home /opt/lab/notebooks; \
    chmod 0777 /opt/lab/runs /opt/lab/home; \
    chown "${LAB_UID}:spark" /opt/lab/notebooks

ENV PATH=/opt/lab/venv/bin:${PATH} \
    VIRTUAL_ENV=/opt/lab/venv \
    PYSPARK_PYTHON=/opt/lab/venv/bin/python \
    PYSPARK_DRIVER_PYTHON=/opt/lab/venv/bin/python \
    HOME=/opt/lab/home \
    LAB_RUNS_DIR=/opt/lab/runs

USER ${LAB_UID}
WORKDIR /opt/lab/notebooks
