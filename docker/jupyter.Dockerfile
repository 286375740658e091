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
# neither pyproject's requires-python (>=3.11) nor the pins: numpy==2.4.6 needs
# Python >= 3.11, and Ubuntu 22.04's own python3.11 is a universe package, 3.11.0,
# outside Ubuntu's security support. So uv (from PyPI) installs a pinned CPython
# 3.11 (python-build-standalone, needs glibc >= 2.17),
# and the lab goes into a venv made from it. The image's python3 only installs uv.
#
# The pinned jars of lab/jars.json (Spark's and Flink's Kafka connectors, Apache Kafka's broker,
# Apache Storm, Apache Samza and the compiler of their Java) are fetched and verified here, at build time, into LAB_CACHE_DIR: a driver (re)start never
# downloads, and the containers need no internet for them.
#
# Layers, from what changes least to what changes most: the pinned packages (from pyproject.toml and
# constraints.txt alone), the jars and the Flink environment (from the few files of lab/ that fetch and
# make them), then README.md and lab/. A change in lab/ rebuilds from `COPY lab` on: the lab installed
# (--no-deps), its Java compiled and the JVMs' class archives trained (`lab fetch`, whose training runs
# most of lab/), not the downloads above it (bench/results/image_rebuild.json; `make test-stack` logs it).
#
# Build: docker compose build   (LAB_UID=$(id -u) to match the owner of ./notebooks;
#        LAB_MAVEN_REPO=https://mirror/maven2/ to fetch the jars from a Maven mirror)
FROM apache/spark:4.3.0-scala2.13-java17-python3-ubuntu

USER root

# uv and the CPython it installs (both pinned; uv 0.13.9 ships the metadata for 3.11.18).
ARG UV_VERSION=0.13.9
ARG LAB_PYTHON=3.11.18

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

WORKDIR /opt/lab

# Every package the lab depends on, pinned by constraints.txt: pyproject's [project] dependencies, the set
# `pip install -c constraints.txt -e .` (`make venv`) installs, from those two files alone, so no change in
# lab/ or README.md reinstalls them. Without the two the Makefile names in UNUSED (1 s of Lark grammar at
# every import of nbformat, for IRI checks nothing here makes).
COPY pyproject.toml constraints.txt ./
RUN set -eux; \
    /opt/lab/venv/bin/python -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' \
      > /tmp/lab-requirements.txt; \
    /opt/lab/venv/bin/python -m pip install -c constraints.txt -r /tmp/lab-requirements.txt; \
    rm /tmp/lab-requirements.txt; \
    /opt/lab/venv/bin/python -m pip uninstall --yes rfc3987-syntax lark; \
    spark_pip="$(/opt/lab/venv/bin/python -c 'import pyspark; print(pyspark.__version__)')"; \
    grep -q "^Spark ${spark_pip} " /opt/spark/RELEASE \
      || { echo "pyspark ${spark_pip} does not match the image's Spark: $(head -1 /opt/spark/RELEASE)" >&2; exit 1; }

# Every jar set of lab/jars.json, each jar checked against its pinned SHA-1, by the lab's fetcher
# (lab/host/jars.py, which imports nothing of the lab but lab/errors.py and lab/host/atomic_file.py: those
# files are all this layer copies). lab.host.jars.cache_dir() reads LAB_CACHE_DIR at run time too, so the driver finds the
# connector here (lab.spark.session puts it in spark.jars; the executors get it from the driver).
# Route https: the image has no mvn. It is urllib, so OpenSSL needs a CA bundle: the standalone
# CPython may look elsewhere than Ubuntu's, hence SSL_CERT_FILE. Owned by root and read-only
# for the lab's user: nothing at run time rewrites it (should its .verified.json not match the
# files' inodes at run time, each check hashes the jars instead: 10 MB for the connector).
# LAB_MAVEN_REPO: a Maven 2 repository to fetch from instead of Maven Central (empty: Central).
# Each layer that writes the cache makes what it wrote readable (as `chmod -R a+rX`, on the files whose
# mode that changes only: a chmod of a lower layer's file would copy it into this one).
ARG LAB_MAVEN_REPO
ENV LAB_CACHE_DIR=/opt/lab/cache
COPY lab/__init__.py lab/errors.py lab/jars.json ./lab/
COPY lab/host/__init__.py lab/host/jars.py lab/host/atomic_file.py ./lab/host/
RUN set -eux; \
    test -s /etc/ssl/certs/ca-certificates.crt \
      || { echo "no CA bundle at /etc/ssl/certs/ca-certificates.crt (package ca-certificates)" >&2; exit 1; }; \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt /opt/lab/venv/bin/python -c \
      'from lab.host import jars; [jars.fetch(name, route="https") for name in jars.manifest()]'; \
    find "${LAB_CACHE_DIR}" \( ! -perm -a+r -o -type d ! -perm -a+x -o -perm /a+x ! -perm -a+x \) -exec chmod a+rX {} +

# The flink pipeline's own environment (PyFlink 2.2.1 pins what the lab's venv cannot share; lab/flink/env.py),
# as `make flink` makes it, into the same cache: without it notebook 08's Flink runs stop at their first cell.
COPY lab/flink-requirements.txt ./lab/
COPY lab/flink/__init__.py lab/flink/env.py ./lab/flink/
RUN set -eux; \
    /opt/lab/venv/bin/python -m lab.flink.env; \
    find "${LAB_CACHE_DIR}" \( ! -perm -a+r -o -type d ! -perm -a+x -o -perm /a+x ! -perm -a+x \) -exec chmod a+rX {} +

# The lab itself, editable, so lab/templates/ and the project root (default runs dir) are where the code
# expects them; --no-deps: its dependencies are all installed above.
COPY README.md ./
COPY lab ./lab
RUN set -eux; \
    /opt/lab/venv/bin/python -m pip install --no-deps -c constraints.txt -e .; \
    /opt/lab/venv/bin/python -c 'import lab.spark.session, lab.sinks.reader, lab.spark.kafka_source, kafka, psycopg, pyarrow, jupyterlab'

# `lab fetch` as the lab runs it: every jar set found cached and verified, the Storm topology, the Samza job and
# the share state reader compiled (lab/host/java_build.py), and the class archives of the driver and broker JVMs
# for this image's Java, Spark and Kafka (lab/spark/archive.py, lab/broker/archive.py), trained by the lab's
# code. Then the Flink environment, found ready.
RUN set -eux; \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt /opt/lab/venv/bin/lab fetch --route https; \
    /opt/lab/venv/bin/python -m lab.flink.env; \
    find "${LAB_CACHE_DIR}" \( ! -perm -a+r -o -type d ! -perm -a+x -o -perm /a+x ! -perm -a+x \) -exec chmod a+rX {} +

# The user the lab runs as (the same in JupyterLab and in the workers). 185 is the
# image's own `spark` user; pass your uid on Linux so ./notebooks stays writable.
# Declared here, where it is first used: every layer above is the same whatever LAB_UID is.
ARG LAB_UID=185

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
