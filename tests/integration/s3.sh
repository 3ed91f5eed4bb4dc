#!/usr/bin/env bash
# The storage layer's S3 client against a real S3 server on loopback (npm's
# s3rver) behind tests/integration/s3proxy.py, where botocore recomputes every
# request's SigV4 signature and, in some cases, injects faults. boto3 (Debian's
# python3-boto3) is the independent client: it uploads the objects and its
# listing and bodies are what dpp-s3cat's must equal.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
S3CAT=$DPP_BIN_DIR/tests/integration/dpp-s3cat
dpp_setup s3 "$S3CAT"
/usr/bin/python3 -c 'import boto3' 2>/dev/null || dpp_fail "python3-boto3 is not installed (scripts/install-deps.sh)"

BOTO=(/usr/bin/python3 -c '
import boto3, hashlib, os, sys
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
cmd, bucket = sys.argv[1], sys.argv[2]
if cmd == "put":  # put BUCKET DIR: every file under DIR, keyed by its relative path
    s3.create_bucket(Bucket=bucket)
    for root, _, files in os.walk(sys.argv[3]):
        for f in files:
            p = os.path.join(root, f)
            s3.upload_file(p, bucket, os.path.relpath(p, sys.argv[3]))
elif cmd == "ls":  # ls BUCKET PREFIX: key, size, ETag, as dpp-s3cat ls prints them
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=sys.argv[3]):
        for o in page.get("Contents", []):
            print("%s\t%d\t%s" % (o["Key"], o["Size"], o["ETag"].strip("\"")))
elif cmd == "sha":  # sha BUCKET KEY
    print(hashlib.sha256(s3.get_object(Bucket=bucket, Key=sys.argv[3])["Body"].read()).hexdigest())
')

dpp_step "objects: a generated table, keys that need encoding, 23 small ones, one of 3 MB"
src=$DPP_TMP/src
mkdir -p "$src/odd" "$src/small"
dpp_gen --out "$src/table" --rows 2000 --shards 2 --partitions 2 --seed 7 >/dev/null
printf 'spaces' >"$src/odd/a b c.txt"
printf 'plus and percent' >"$src/odd/1+1=2 %41.txt"
printf 'unicode' >"$src/odd/grüße-日本.txt"
printf '' >"$src/odd/empty"
for i in $(seq 1 23); do head -c "$i" /dev/urandom >"$src/small/$i.bin"; done
head -c 3000001 /dev/urandom >"$src/big.bin"
dpp_start_s3
"${BOTO[@]}" put tables "$src"
nobj=$(find "$src" -type f | wc -l)
dpp_log "$nobj objects uploaded by boto3 through the signature-checking proxy"
[[ $(dpp_s3_stat signature_failures) == 0 ]] || dpp_fail "the proxy refused boto3's own signatures"

dpp_step "case 1: ListObjectsV2 in pages of 7 equals boto3's listing"
"${BOTO[@]}" ls tables "" >"$DPP_TMP/boto.ls"
dpp_timeout 60 "$S3CAT" ls s3://tables/ --max-keys 7 >"$DPP_TMP/dpp.ls" 2>"$DPP_TMP/dpp.err" ||
    dpp_fail "ls: $(cat "$DPP_TMP/dpp.err")"
[[ $(wc -l <"$DPP_TMP/boto.ls") == "$nobj" ]] || dpp_fail "boto3 lists $(wc -l <"$DPP_TMP/boto.ls") of $nobj"
diff "$DPP_TMP/boto.ls" "$DPP_TMP/dpp.ls" || dpp_fail "the listings differ"
pages=$(sed -n 's/^requests \([0-9]*\).*/\1/p' "$DPP_TMP/dpp.err")
[[ $pages == $(((nobj + 6) / 7)) ]] || dpp_fail "ls took $pages requests for $nobj objects in pages of 7"
dpp_timeout 60 "$S3CAT" ls s3://tables/small/1 >"$DPP_TMP/prefix.ls" 2>/dev/null
[[ $(cut -f1 "$DPP_TMP/prefix.ls" | tr '\n' ' ') == "small/1.bin small/10.bin "* ]] ||
    dpp_fail "prefix small/1 listed: $(cut -f1 "$DPP_TMP/prefix.ls" | tr '\n' ' ')"
dpp_log "case 1: $nobj objects in $pages pages, equal to boto3's; a prefix lists only its keys"

dpp_step "case 2: every object read in ranged GETs (64 KiB, 4 in flight) equals boto3's GET"
# boto3's SHA-256 of every object, taken once (boto3 retries on its own, so
# it stays out of the faulty proxy's counts).
n=0
while IFS=$'\t' read -r key _ _; do
    n=$((n + 1))
    "${BOTO[@]}" sha tables "$key" >"$DPP_TMP/want.$n" </dev/null
done <"$DPP_TMP/boto.ls"
check_all() { # label: every object's SHA-256 through dpp-s3cat, against boto3's
    local key sum i=0
    while IFS=$'\t' read -r key _ _; do
        i=$((i + 1))
        sum=$(dpp_timeout 60 "$S3CAT" get "s3://tables/$key" --chunk 65536 --depth 4 2>>"$DPP_TMP/get.err" </dev/null |
            sha256sum | cut -d' ' -f1) || dpp_fail "$1: get $key: $(tail -1 "$DPP_TMP/get.err")"
        [[ $sum == "$(<"$DPP_TMP/want.$i")" ]] || dpp_fail "$1: $key reads $sum, boto3 $(<"$DPP_TMP/want.$i")"
    done <"$DPP_TMP/boto.ls"
}
check_all "case 2"
[[ $(dpp_s3_stat signature_failures) == 0 ]] || dpp_fail "case 2: the proxy refused a signature of dpp's"
dpp_log "case 2: $nobj objects equal, $(dpp_s3_stat requests) requests with their signatures checked by botocore"

dpp_step "case 2b: virtual-hosted addressing (BUCKET.s3.localhost): listing and bodies equal boto3's"
# libcurl takes every *.localhost name for loopback, as RFC 6761 allows.
vhost=(env "AWS_ENDPOINT_URL=http://s3.localhost:${AWS_ENDPOINT_URL##*:}" DPP_S3_ADDRESSING_STYLE=virtual)
dpp_timeout 60 "${vhost[@]}" "$S3CAT" ls s3://tables/ --max-keys 7 >"$DPP_TMP/vhost.ls" 2>"$DPP_TMP/vhost.err" ||
    dpp_fail "case 2b: ls: $(cat "$DPP_TMP/vhost.err")"
diff "$DPP_TMP/boto.ls" "$DPP_TMP/vhost.ls" || dpp_fail "case 2b: the listings differ"
i=0
while IFS=$'\t' read -r key _ _; do
    i=$((i + 1))
    [[ $key == big.bin || $key == odd/* ]] || continue
    sum=$(dpp_timeout 60 "${vhost[@]}" "$S3CAT" get "s3://tables/$key" --chunk 65536 --depth 4 \
        2>"$DPP_TMP/vhost.err" </dev/null | sha256sum | cut -d' ' -f1)
    [[ $sum == "$(<"$DPP_TMP/want.$i")" ]] || dpp_fail "case 2b: $key reads $sum: $(cat "$DPP_TMP/vhost.err")"
done <"$DPP_TMP/boto.ls"
virtual=$(dpp_s3_stat virtual_host)
((virtual > 0)) || dpp_fail "case 2b: no request reached the store as BUCKET.s3.localhost"
[[ $(dpp_s3_stat signature_failures) == 0 ]] || dpp_fail "case 2b: the proxy refused a virtual-hosted signature"
dpp_log "case 2b: $virtual requests to tables.s3.localhost, listing and bodies equal, signatures accepted"

dpp_step "case 2c: https with a private CA (AWS_CA_BUNDLE): equal; without it, a clear refusal"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
    -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
    -keyout "$DPP_TMP/tls.key" -out "$DPP_TMP/tls.pem" 2>"$DPP_TMP/openssl.err" ||
    dpp_fail "case 2c: openssl req: $(cat "$DPP_TMP/openssl.err")"
dpp_start_daemon s3tls /usr/bin/python3 "$DPP_SOURCE_DIR/tests/integration/s3proxy.py" \
    --upstream "$DPP_S3_STORE" --key S3RVER:S3RVER --tls "$DPP_TMP/tls.pem" "$DPP_TMP/tls.key"
tls=(env "AWS_ENDPOINT_URL=https://localhost:${DPP_LAST_ADDR##*:}" "AWS_CA_BUNDLE=$DPP_TMP/tls.pem")
dpp_timeout 60 "${tls[@]}" "$S3CAT" ls s3://tables/ >"$DPP_TMP/tls.ls" 2>"$DPP_TMP/tls.err" ||
    dpp_fail "case 2c: ls over https: $(cat "$DPP_TMP/tls.err")"
diff "$DPP_TMP/boto.ls" "$DPP_TMP/tls.ls" || dpp_fail "case 2c: the listings differ"
sum=$(dpp_timeout 60 "${tls[@]}" "$S3CAT" get s3://tables/big.bin --chunk 65536 --depth 4 \
    2>"$DPP_TMP/tls.err" | sha256sum | cut -d' ' -f1)
[[ $sum == "$("${BOTO[@]}" sha tables big.bin)" ]] || dpp_fail "case 2c: big.bin reads $sum: $(cat "$DPP_TMP/tls.err")"
if dpp_timeout 60 env -u AWS_CA_BUNDLE "AWS_ENDPOINT_URL=https://localhost:${DPP_LAST_ADDR##*:}" \
    "$S3CAT" head s3://tables/big.bin 2>"$DPP_TMP/tls.err"; then
    dpp_fail "case 2c: a certificate no system CA signed was accepted"
fi
grep -q 'a store with a private CA needs AWS_CA_BUNDLE=PEM file' "$DPP_TMP/tls.err" ||
    dpp_fail "case 2c: the refusal does not say what to do: $(cat "$DPP_TMP/tls.err")"
if dpp_timeout 60 "${tls[@]}" AWS_CA_BUNDLE=/nonexistent.pem "$S3CAT" head s3://tables/big.bin 2>"$DPP_TMP/tls.err"; then
    dpp_fail "case 2c: a missing AWS_CA_BUNDLE file was accepted"
fi
grep -q 'AWS_CA_BUNDLE=/nonexistent.pem: No such file or directory' "$DPP_TMP/tls.err" ||
    dpp_fail "case 2c: a missing bundle is not named: $(cat "$DPP_TMP/tls.err")"
dpp_log "case 2c: https listing and body equal; refused without the CA: $(tail -n 1 "$DPP_TMP/tls.err")"

dpp_step "case 3: faults on every 5th request (503, 500, reset, short body): retried, exact, counted"
dpp_stop s3proxy
dpp_start_daemon s3proxy /usr/bin/python3 "$DPP_SOURCE_DIR/tests/integration/s3proxy.py" \
    --upstream "$DPP_S3_STORE" --key S3RVER:S3RVER --stats "$DPP_S3_STATS" --fault-every 5
export AWS_ENDPOINT_URL=http://$DPP_LAST_ADDR
: >"$DPP_TMP/get.err"
export DPP_S3_BACKOFF_BASE_MS=5
check_all "case 3"
dpp_timeout 60 "$S3CAT" ls s3://tables/ --max-keys 3 >"$DPP_TMP/faulty.ls" 2>>"$DPP_TMP/get.err"
diff "$DPP_TMP/boto.ls" "$DPP_TMP/faulty.ls" || dpp_fail "case 3: the listing differs under faults"
faults=$(dpp_s3_stat faults)
retries=$(awk '{s += $4} END {print s}' "$DPP_TMP/get.err")
((faults >= 8)) || dpp_fail "case 3: only $faults faults were injected"
[[ $retries == "$faults" ]] || dpp_fail "case 3: $faults faults injected, $retries retries counted"
dpp_log "case 3: $faults faults over $(dpp_s3_stat requests) requests, each retried once; every byte equal"

dpp_step "case 4: a store that always answers 503 is given up on after DPP_S3_MAX_ATTEMPTS"
dpp_stop s3proxy
dpp_start_daemon s3proxy /usr/bin/python3 "$DPP_SOURCE_DIR/tests/integration/s3proxy.py" \
    --upstream "$DPP_S3_STORE" --key S3RVER:S3RVER --stats "$DPP_S3_STATS" --always-503
export AWS_ENDPOINT_URL=http://$DPP_LAST_ADDR
if DPP_S3_MAX_ATTEMPTS=3 dpp_timeout 60 "$S3CAT" ls s3://tables/small 2>"$DPP_TMP/e4"; then
    dpp_fail "case 4: succeeded against a store that only says 503"
fi
grep -q 'LIST s3://tables/small: HTTP 503 SlowDown, 3 times; gave up (DPP_S3_MAX_ATTEMPTS=3)' "$DPP_TMP/e4" ||
    dpp_fail "case 4: $(cat "$DPP_TMP/e4")"
[[ $(dpp_s3_stat requests) == 3 ]] || dpp_fail "case 4: $(dpp_s3_stat requests) requests, expected 3"
dpp_log "case 4: $(head -1 "$DPP_TMP/e4")"
unset DPP_S3_BACKOFF_BASE_MS

dpp_step "case 5: errors name the request (method, URL, range) and the HTTP status"
dpp_stop s3proxy
dpp_start_daemon s3proxy /usr/bin/python3 "$DPP_SOURCE_DIR/tests/integration/s3proxy.py" \
    --upstream "$DPP_S3_STORE" --key S3RVER:S3RVER --stats "$DPP_S3_STATS" --short-ranges tables/big.bin
export AWS_ENDPOINT_URL=http://$DPP_LAST_ADDR
expect_error() { # what pattern command...
    local what=$1 pattern=$2
    shift 2
    if dpp_timeout 60 "$@" >/dev/null 2>"$DPP_TMP/err"; then
        dpp_fail "$what: succeeded"
    fi
    grep -q -- "$pattern" "$DPP_TMP/err" || dpp_fail "$what: $(head -1 "$DPP_TMP/err")"
    dpp_log "$what: $(head -1 "$DPP_TMP/err")"
}
expect_error "missing key" 'HEAD s3://tables/nope.bin: no such key in bucket "tables" (HTTP 404)' "$S3CAT" get s3://tables/nope.bin
expect_error "missing bucket" 'LIST s3://nobucket/x: bucket "nobucket" does not exist at .* (HTTP 404 NoSuchBucket' "$S3CAT" ls s3://nobucket/x
expect_error "wrong secret" 'HEAD s3://tables/big.bin: access denied (HTTP 403' \
    env AWS_SECRET_ACCESS_KEY=wrong "$S3CAT" get s3://tables/big.bin
[[ $(dpp_s3_stat signature_failures) == 1 ]] || dpp_fail "the wrong secret's signature was not refused by the proxy"
etag=$(awk -F'\t' '$1 == "big.bin" {print $3}' "$DPP_TMP/boto.ls")
expect_error "changed object" "GET s3://tables/big.bin bytes=0-1048575: changed since the session was planned (ETag \"0123\" expected, \"$etag\" read; HTTP 206)" \
    "$S3CAT" get s3://tables/big.bin --if-match 0123
expect_error "no credentials" 'no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY' \
    env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY HOME="$DPP_TMP/nohome" "$S3CAT" head s3://tables/big.bin
expect_error "half the keys" 'AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not' \
    env -u AWS_SECRET_ACCESS_KEY "$S3CAT" head s3://tables/big.bin
expect_error "bad bucket name" '"Tables_1" is no S3 bucket name' "$S3CAT" head s3://Tables_1/x
expect_error "endpoint with a path" 'AWS_ENDPOINT_URL=http://h/x: expected no path' \
    env AWS_ENDPOINT_URL=http://h/x "$S3CAT" head s3://tables/x

dpp_step "case 6: credentials from a profile of ~/.aws/credentials, and a session token"
mkdir -p "$DPP_TMP/home/.aws"
cat >"$DPP_TMP/home/.aws/credentials" <<'EOF'
# written by tests/integration/s3.sh
[default]
aws_access_key_id = nobody
aws_secret_access_key = wrong

[ci]
aws_access_key_id = S3RVER
aws_secret_access_key = S3RVER
aws_session_token = FQoGZXIvYXdzEXAMPLE+token/with=signs
EOF
printf '[profile ci]\nregion = eu-west-3\ns3 =\n    addressing_style = path\n' >"$DPP_TMP/home/.aws/config"
out=$(env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_REGION HOME="$DPP_TMP/home" AWS_PROFILE=ci \
    "$S3CAT" head s3://tables/big.bin 2>"$DPP_TMP/err") || dpp_fail "case 6: $(cat "$DPP_TMP/err")"
[[ $out == "3000001	$etag" ]] || dpp_fail "case 6: head says '$out'"
[[ $(dpp_s3_stat signature_failures) == 1 ]] || dpp_fail "case 6: the profile's signature (region eu-west-3, token) was refused"
printf '[ci]\naws_access_key_id S3RVER\n' >"$DPP_TMP/home/.aws/credentials"
expect_error "malformed credentials" "$DPP_TMP/home/.aws/credentials line 2: expected \[section\], key = value or a comment" \
    env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY HOME="$DPP_TMP/home" AWS_PROFILE=ci "$S3CAT" head s3://tables/big.bin
dpp_log "case 6: profile ci's keys, token and region signed a request botocore accepts"

dpp_step "case 7: ranges answered short (206, Content-Range ending early): read on, exact, counted"
# The proxy answers every range of big.bin with at most 100,000 bytes: a
# store or proxy that caps a range's length. Each short answer is the
# object's middle, not its end.
before=$(dpp_s3_stat short_ranges)
sum=$(dpp_timeout 60 "$S3CAT" get s3://tables/big.bin --chunk 1048576 --depth 2 2>"$DPP_TMP/short.err" |
    sha256sum | cut -d' ' -f1)
[[ $sum == "$("${BOTO[@]}" sha tables big.bin)" ]] ||
    dpp_fail "case 7: big.bin reads $sum through short ranges: $(cat "$DPP_TMP/short.err")"
short=$(($(dpp_s3_stat short_ranges) - before))
counted=$(sed -n 's/^requests [0-9]* retries \([0-9]*\) short \([0-9]*\)$/\1 \2/p' "$DPP_TMP/short.err")
((short >= 27)) || dpp_fail "case 7: the proxy cut $short ranges short, expected 27 or more"
[[ $counted == "$short $short" ]] || dpp_fail "case 7: $short short answers, counted (retries short): $counted"
dpp_log "case 7: $short ranges answered short, each read on and counted; every byte equal"

dpp_log "PASS"
