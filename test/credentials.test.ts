import { createHash, createSecretKey, randomBytes } from 'node:crypto';
import test from 'ava';
import {
  API_KEY_PATTERN,
  constantTimeEqual,
  createSecretBox,
  generateApiKey,
  generateSigningSecret,
  hashApiKey,
  isWellFormedApiKey,
  SecretBoxError,
} from '../application/credentials.ts';

test('generateApiKey: format, 256 random bits, hash and prefix', (t) => {
  const k = generateApiKey();
  t.regex(k.api_key, API_KEY_PATTERN);
  t.true(isWellFormedApiKey(k.api_key));
  const random = Buffer.from(k.api_key.slice('pds_key_'.length), 'base64url');
  t.is(random.length, 32);
  t.regex(k.key_id, /^key_[A-Za-z0-9_-]{12}$/);
  t.is(k.key_hash, createHash('sha256').update(k.api_key).digest('hex'));
  t.regex(k.key_hash, /^[0-9a-f]{64}$/);
  t.is(k.key_prefix, k.api_key.slice(0, 12));
  t.false(k.api_key.includes(k.key_id));
});

test('generateApiKey: every key and key id differs', (t) => {
  const keys = Array.from({ length: 1000 }, () => generateApiKey());
  t.is(new Set(keys.map((k) => k.api_key)).size, keys.length);
  t.is(new Set(keys.map((k) => k.key_id)).size, keys.length);
  t.is(new Set(keys.map((k) => k.key_hash)).size, keys.length);
});

test('generateApiKey: the random part looks uniform (no stuck characters)', (t) => {
  const counts = new Map<string, number>();
  for (let i = 0; i < 500; i++) {
    // The last character of 43 base64url characters carries only 4 bits, so look at the first 42.
    for (const c of generateApiKey().api_key.slice(8, 50)) counts.set(c, (counts.get(c) ?? 0) + 1);
  }
  t.is(counts.size, 64);
  const expected = (500 * 42) / 64;
  for (const n of counts.values()) t.true(n > expected * 0.6 && n < expected * 1.4);
});

test('the prefix leaves almost all of the key unknown', (t) => {
  const k = generateApiKey();
  const randomChars = k.api_key.length - 'pds_key_'.length;
  const revealed = k.key_prefix.length - 'pds_key_'.length;
  // At most 4 of 43 random characters (24 of 256 bits) are shown: at least 232 bits stay secret.
  t.true(revealed <= 4);
  t.true((randomChars - revealed) * 6 >= 232);
  t.false(k.key_prefix === k.api_key);
  t.not(hashApiKey(k.key_prefix), k.key_hash);
});

test('hashApiKey is stable and SHA-256 hex', (t) => {
  t.is(hashApiKey('pds_key_abc'), hashApiKey('pds_key_abc'));
  t.is(hashApiKey('abc'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  t.not(hashApiKey('pds_key_abc'), hashApiKey('pds_key_abd'));
});

test('isWellFormedApiKey refuses other shapes', (t) => {
  const k = generateApiKey().api_key;
  t.false(isWellFormedApiKey(k.slice(0, -1)));
  t.false(isWellFormedApiKey(`${k}x`));
  t.false(isWellFormedApiKey(k.replace('pds_key_', 'pds_xyz_')));
  t.false(isWellFormedApiKey(''));
});

test('generateSigningSecret: whsec_ + base64 of 32 random bytes, all different', (t) => {
  const s = generateSigningSecret();
  t.regex(s, /^whsec_[A-Za-z0-9+/]{43}=$/);
  t.is(Buffer.from(s.slice(6), 'base64').length, 32);
  t.not(generateSigningSecret(), s);
});

const key = randomBytes(32);

test('secret box: round trip, fresh IV each time, v1 format', (t) => {
  const box = createSecretBox(key);
  const plaintext = 'whsec_söme secret ✓';
  const a = box.encrypt(plaintext);
  const b = box.encrypt(plaintext);
  t.regex(a, /^v1\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]*$/);
  t.not(a, b);
  t.false(a.includes('secret'));
  t.is(box.decrypt(a), plaintext);
  t.is(box.decrypt(b), plaintext);
  t.is(box.decrypt(box.encrypt('')), '');
});

test('secret box accepts a KeyObject', (t) => {
  const fromBuffer = createSecretBox(key);
  const fromKeyObject = createSecretBox(createSecretKey(key));
  t.is(fromKeyObject.decrypt(fromBuffer.encrypt('x')), 'x');
});

test('secret box: a key of the wrong size is refused', (t) => {
  t.throws(() => createSecretBox(randomBytes(16)), { instanceOf: TypeError });
  t.throws(() => createSecretBox(createSecretKey(randomBytes(31))), { instanceOf: TypeError });
});

test('secret box: any tampering is detected', (t) => {
  const box = createSecretBox(key);
  const token = box.encrypt('auth-token-123');
  const [v, iv, tag, ct] = token.split('.');
  const flip = (part: string) => {
    const bytes = Buffer.from(part, 'base64url');
    bytes[0] ^= 1;
    return bytes.toString('base64url');
  };
  for (const bad of [
    [v, flip(iv), tag, ct],
    [v, iv, flip(tag), ct],
    [v, iv, tag, flip(ct)],
    [v, iv, tag, Buffer.concat([Buffer.from(ct, 'base64url'), Buffer.from([0])]).toString('base64url')],
  ]) {
    t.throws(() => box.decrypt(bad.join('.')), { instanceOf: SecretBoxError, message: /tampered/ });
  }
  for (const bad of ['', 'v1', 'v2.' + token.slice(3), `${token}.x`, token.replace(/\./g, ':'), 'v1.a.b.c']) {
    t.throws(() => box.decrypt(bad), { instanceOf: SecretBoxError });
  }
});

test('secret box: another key cannot open a token', (t) => {
  const token = createSecretBox(key).encrypt('auth-token-123');
  t.throws(() => createSecretBox(randomBytes(32)).decrypt(token), { instanceOf: SecretBoxError });
});

test('secret box: a token sealed with a context opens only with that context', (t) => {
  const box = createSecretBox(key);
  const token = box.encrypt('auth-token-123', 'webhook:1:auth_token');
  t.is(box.decrypt(token, 'webhook:1:auth_token'), 'auth-token-123');
  t.throws(() => box.decrypt(token, 'webhook:2:auth_token'), { instanceOf: SecretBoxError });
  t.throws(() => box.decrypt(token), { instanceOf: SecretBoxError });
});

test('secret box: changing the caller buffer afterwards does not change the key', (t) => {
  const k = Buffer.from(key);
  const box = createSecretBox(k);
  const token = box.encrypt('x');
  k.fill(0);
  t.is(box.decrypt(token), 'x');
});

test('constantTimeEqual', (t) => {
  t.true(constantTimeEqual('operator-token', 'operator-token'));
  t.false(constantTimeEqual('operator-token', 'operator-tokem'));
  t.false(constantTimeEqual('operator-token', 'operator-token-longer'));
  t.false(constantTimeEqual('', 'x'));
  t.true(constantTimeEqual('', ''));
  t.true(constantTimeEqual('ünïcode', 'ünïcode'));
  // Another length is refused, whether a prefix of the secret, the secret and more, or as many
  // characters of another UTF-8 length.
  t.false(constantTimeEqual('operator-toke', 'operator-token'));
  t.false(constantTimeEqual('operator-tokenn', 'operator-token'));
  t.false(constantTimeEqual('ünïcodf', 'unicodf'));
  t.false(constantTimeEqual('', ''.padEnd(32, 'x')));
});
