#!/usr/bin/env bash
# Installs the Debian 12 packages dpp builds and tests with, when missing.
# Needs root (or sudo) only when something is missing.
set -euo pipefail

packages=(
    build-essential cmake pkg-config
    libuv1-dev libprotobuf-c-dev protobuf-c-compiler libzstd-dev liburing-dev
    libjansson-dev libcmocka-dev
    # SHA-256 and HMAC (OpenSSL's libcrypto)
    libssl-dev
    # S3-compatible object storage (HTTP, TLS)
    libcurl4-openssl-dev
    # Parquet codecs, the string hash, the tokenizer's patterns
    libsnappy-dev zlib1g-dev liblz4-dev libbrotli-dev libxxhash-dev libpcre2-dev
    clang libclang-rt-14-dev  # make fuzz: clang 14 (clang-14), libFuzzer and sanitizer runtimes
    python3-torch python3-numpy
    # tests only: an independent Prometheus text parser (metrics test), YAML
    # for the deploy/ checks, ip(8) for the network-namespace test
    python3-prometheus-client python3-yaml iproute2
    # tests only: Unicode properties in Python regexes (the tokenizer's reference),
    # zstd(1) for compressed JSON Lines
    python3-regex zstd
    # tests only: boto3, the independent S3 client of tests/integration/s3.sh,
    # and openssl(1) for its https case's certificate
    python3-boto3 openssl
    # tests only: libsentencepiece's trainer and encoder, the reference of
    # tests/text/sentencepiece.sh
    python3-sentencepiece
    # the README's Python install (a venv that sees Debian's torch), and
    # `pip install ./python` offline
    python3-venv
    python3-pip python3-setuptools python3-wheel
)

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "install-deps: need root to install ${missing[*]}" >&2; exit 1; }
    sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
