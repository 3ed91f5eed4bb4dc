// SPDX-License-Identifier: Apache-2.0
// XXH3_64bits_withSeed (xxHash 0.8) in JavaScript BigInt, so that
// duck_sums.mjs can mirror dpp's `hash` of strings (docs/spec.md) without
// sharing dpp's code or its libxxhash. Slow (BigInt), which is fine for test
// tables. Checked against libxxhash on every length class: see xxh3SelfTest.

const M64 = (1n << 64n) - 1n;
const P32_1 = 0x9E3779B1n;
const P32_2 = 0x85EBCA77n;
const P32_3 = 0xC2B2AE3Dn;
const P64_1 = 0x9E3779B185EBCA87n;
const P64_2 = 0xC2B2AE3D27D4EB4Fn;
const P64_3 = 0x165667B19E3779F9n;
const P64_4 = 0x85EBCA77C2B2AE63n;
const P64_5 = 0x27D4EB2F165667C5n;

// The default 192-byte secret of the XXH3 specification.
const K_SECRET = Uint8Array.from([
    0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
    0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
    0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
    0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
    0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
    0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
    0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
    0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
    0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
    0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
    0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
    0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
]);

const STRIPE = 64;
const SECRET_CONSUME = 8;

function le(bytes, at, n) {
    let v = 0n;
    for (let k = n - 1; k >= 0; k--)
        v = (v << 8n) | BigInt(bytes[at + k]);
    return v;
}
const le32 = (b, at) => le(b, at, 4);
const le64 = (b, at) => le(b, at, 8);

const mul = (a, b) => (a * b) & M64;
const add = (a, b) => (a + b) & M64;
const sub = (a, b) => (a - b) & M64;
const rotl = (x, r) => ((x << BigInt(r)) | (x >> BigInt(64 - r))) & M64;

function swap32(x) {
    x &= 0xffffffffn;
    return ((x & 0xffn) << 24n) | ((x & 0xff00n) << 8n) | ((x >> 8n) & 0xff00n) | (x >> 24n);
}

function swap64(x) {
    let r = 0n;
    for (let k = 0; k < 8; k++) {
        r = (r << 8n) | (x & 0xffn);
        x >>= 8n;
    }
    return r;
}

// The 128-bit product of two 64-bit values, its halves xored together.
function mulFold(a, b) {
    const p = a * b;
    return (p & M64) ^ (p >> 64n);
}

function xxh64Avalanche(h) {
    h ^= h >> 33n;
    h = mul(h, P64_2);
    h ^= h >> 29n;
    h = mul(h, P64_3);
    return h ^ (h >> 32n);
}

function avalanche(h) {
    h ^= h >> 37n;
    h = mul(h, 0x165667919E3779F9n);
    return h ^ (h >> 32n);
}

function rrmxmx(h, len) {
    h ^= rotl(h, 49) ^ rotl(h, 24);
    h = mul(h, 0x9FB21C651E98DF25n);
    h ^= add(h >> 35n, BigInt(len));
    h = mul(h, 0x9FB21C651E98DF25n);
    return h ^ (h >> 28n);
}

function mix16(input, at, secret, sAt, seed) {
    return mulFold(le64(input, at) ^ add(le64(secret, sAt), seed),
                   le64(input, at + 8) ^ sub(le64(secret, sAt + 8), seed));
}

function upTo16(input, len, s, seed) {
    if (len > 8) {
        const lo = le64(input, 0) ^ add(le64(s, 24) ^ le64(s, 32), seed);
        const hi = le64(input, len - 8) ^ sub(le64(s, 40) ^ le64(s, 48), seed);
        return avalanche(add(add(add(BigInt(len), swap64(lo)), hi), mulFold(lo, hi)));
    }
    if (len >= 4) {
        const seed2 = seed ^ (swap32(seed) << 32n);
        const in64 = add(le32(input, len - 4), le32(input, 0) << 32n);
        const keyed = in64 ^ sub(le64(s, 8) ^ le64(s, 16), seed2);
        return rrmxmx(keyed, len);
    }
    if (len > 0) {
        const combined = (BigInt(input[0]) << 16n) | (BigInt(input[len >> 1]) << 24n) |
                         BigInt(input[len - 1]) | (BigInt(len) << 8n);
        return xxh64Avalanche(combined ^ add(le32(s, 0) ^ le32(s, 4), seed));
    }
    return xxh64Avalanche(seed ^ le64(s, 56) ^ le64(s, 64));
}

function upTo128(input, len, s, seed) {
    let acc = mul(BigInt(len), P64_1);
    // Pairs of 16-byte blocks from both ends, as many as the length needs.
    const pairs = len > 96 ? 4 : len > 64 ? 3 : len > 32 ? 2 : 1;
    for (let k = pairs - 1; k >= 0; k--) {
        acc = add(acc, mix16(input, 16 * k, s, 32 * k, seed));
        acc = add(acc, mix16(input, len - 16 * (k + 1), s, 32 * k + 16, seed));
    }
    return avalanche(acc);
}

function upTo240(input, len, s, seed) {
    let acc = mul(BigInt(len), P64_1);
    for (let k = 0; k < 8; k++)
        acc = add(acc, mix16(input, 16 * k, s, 16 * k, seed));
    acc = avalanche(acc);
    const rounds = Math.floor(len / 16);
    for (let k = 8; k < rounds; k++)
        acc = add(acc, mix16(input, 16 * k, s, 16 * (k - 8) + 3, seed));
    acc = add(acc, mix16(input, len - 16, s, 136 - 17, seed));
    return avalanche(acc);
}

function accumulateStripe(acc, input, at, s, sAt) {
    for (let k = 0; k < 8; k++) {
        const data = le64(input, at + 8 * k);
        const key = data ^ le64(s, sAt + 8 * k);
        acc[k ^ 1] = add(acc[k ^ 1], data);
        acc[k] = add(acc[k], (key & 0xffffffffn) * (key >> 32n));
    }
}

function scramble(acc, s, sAt) {
    for (let k = 0; k < 8; k++) {
        let a = acc[k];
        a ^= a >> 47n;
        a ^= le64(s, sAt + 8 * k);
        acc[k] = mul(a, P32_1);
    }
}

function long(input, len, seed) {
    let s = K_SECRET;
    if (seed !== 0n) {
        s = new Uint8Array(K_SECRET.length);
        const view = new DataView(s.buffer);
        for (let k = 0; k < K_SECRET.length; k += 16) {
            view.setBigUint64(k, add(le64(K_SECRET, k), seed), true);
            view.setBigUint64(k + 8, sub(le64(K_SECRET, k + 8), seed), true);
        }
    }
    const acc = [P32_3, P64_1, P64_2, P64_3, P64_4, P32_2, P64_5, P32_1];
    const stripesPerBlock = (s.length - STRIPE) / SECRET_CONSUME;
    const blockLen = STRIPE * stripesPerBlock;
    const blocks = Math.floor((len - 1) / blockLen);
    for (let b = 0; b < blocks; b++) {
        for (let n = 0; n < stripesPerBlock; n++)
            accumulateStripe(acc, input, b * blockLen + n * STRIPE, s, n * SECRET_CONSUME);
        scramble(acc, s, s.length - STRIPE);
    }
    const stripes = Math.floor((len - 1 - blockLen * blocks) / STRIPE);
    for (let n = 0; n < stripes; n++)
        accumulateStripe(acc, input, blocks * blockLen + n * STRIPE, s, n * SECRET_CONSUME);
    accumulateStripe(acc, input, len - STRIPE, s, s.length - STRIPE - 7);
    let result = mul(BigInt(len), P64_1);
    for (let k = 0; k < 4; k++)
        result = add(result, mulFold(acc[2 * k] ^ le64(s, 11 + 16 * k),
                                     acc[2 * k + 1] ^ le64(s, 11 + 16 * k + 8)));
    return avalanche(result);
}

// XXH3_64bits_withSeed(bytes, bytes.length, seed) as an unsigned BigInt.
// seed: a BigInt, taken modulo 2^64 (so a negative int64 salt works as its
// two's-complement bits, as in dpp).
export function xxh3(bytes, seed = 0n) {
    const sd = BigInt.asUintN(64, BigInt(seed));
    const len = bytes.length;
    if (len <= 16)
        return upTo16(bytes, len, K_SECRET, sd);
    if (len <= 128)
        return upTo128(bytes, len, K_SECRET, sd);
    if (len <= 240)
        return upTo240(bytes, len, K_SECRET, sd);
    return long(bytes, len, sd);
}

// The test vectors of docs/spec.md; throws when one fails.
export function xxh3SelfTest() {
    const te = new TextEncoder();
    const vectors = [['', 0n, 0x2d06800538d394c2n], ['a', 0n, 0xe6c632b61e964e1fn]];
    for (const [s, seed, want] of vectors) {
        const got = xxh3(te.encode(s), seed);
        if (got !== want)
            throw new Error(`xxh3(${JSON.stringify(s)}, ${seed}) = ${got.toString(16)}, ` +
                            `expected ${want.toString(16)}`);
    }
}
