/**
 * Secret handling (node:crypto only): partner API keys, webhook signing secrets, the secret box that
 * encrypts secrets before they enter any event, and the constant-time comparison of bearer tokens.
 *
 * - API keys: `pds_key_` + base64url of 32 random bytes (256 bits). Only the SHA-256 hash (hex) and the
 *   first 12 characters (the display prefix) are ever stored; the key itself is shown once.
 *   A fast hash is right here: the key is uniformly random, so there is nothing to brute-force.
 * - Operator tokens: `pds_op_` + base64url of 32 random bytes, kept like API keys (the hash and an 11-character
 *   prefix); the prefix tells them apart from partner keys, so neither is looked up where it cannot belong.
 * - Signing secrets: `whsec_` + base64 of 32 random bytes. The HMAC key is the whole string as UTF-8.
 * - Secret box: AES-256-GCM, a fresh random 12-byte IV per message, written `v1.<iv>.<tag>.<ciphertext>`
 *   (each base64url). Tampering, a truncated token or another key makes `decrypt` throw.
 */
import {
  createCipheriv,
  createDecipheriv,
  hash,
  type KeyObject,
  randomBytes,
  timingSafeEqual,
} from 'node:crypto';

export const API_KEY_PREFIX = 'pds_key_';
/** Random bytes in an API key: 256 bits. */
export const API_KEY_BYTES = 32;
/** Characters of a key that may be shown (e.g. `pds_key_AbCd`): the fixed prefix and 4 random characters. */
export const API_KEY_DISPLAY_LENGTH = 12;
/** What a well-formed API key looks like; anything else can be refused without a lookup. */
export const API_KEY_PATTERN = /^pds_key_[A-Za-z0-9_-]{43}$/;

export const OPERATOR_TOKEN_PREFIX = 'pds_op_';
/** Characters of an operator token that may be shown (`pds_op_AbCd`): the fixed prefix and 4 random characters. */
export const OPERATOR_TOKEN_DISPLAY_LENGTH = 11;
/** What a well-formed operator token looks like; anything else is not looked up. */
export const OPERATOR_TOKEN_PATTERN = /^pds_op_[A-Za-z0-9_-]{43}$/;

export const SIGNING_SECRET_PREFIX = 'whsec_';
export const SIGNING_SECRET_BYTES = 32;

export interface GeneratedApiKey {
  /** The key itself: show it once, never store or log it. */
  api_key: string;
  key_id: string;
  /** SHA-256 of the key, hex: what is stored and looked up. */
  key_hash: string;
  /** The first 12 characters: safe to display. */
  key_prefix: string;
}

// The one-shot `hash` is several times quicker than a `Hash` object for a token's few bytes.
const sha256 = (text: string) => hash('sha256', text, 'buffer');

/** SHA-256 of an API key (or an operator token), lowercase hex. */
export function hashApiKey(apiKey: string): string {
  return sha256(apiKey).toString('hex');
}

/** The non-secret part of a key that may be displayed to tell keys apart. */
export function apiKeyPrefix(apiKey: string): string {
  return apiKey.slice(0, API_KEY_DISPLAY_LENGTH);
}

export function isWellFormedApiKey(value: string): boolean {
  return API_KEY_PATTERN.test(value);
}

/** A fresh key id, e.g. `key_3fK9x_Lm2QaZ` (not secret). */
export function generateKeyId(): string {
  return 'key_' + randomBytes(9).toString('base64url');
}

export function generateApiKey(): GeneratedApiKey {
  const api_key = API_KEY_PREFIX + randomBytes(API_KEY_BYTES).toString('base64url');
  return {
    api_key,
    key_id: generateKeyId(),
    key_hash: hashApiKey(api_key),
    key_prefix: apiKeyPrefix(api_key),
  };
}

export interface GeneratedOperatorToken {
  /** The token itself: show it once, never store or log it. */
  token: string;
  token_id: string;
  /** SHA-256 of the token, hex: what is stored and looked up. */
  token_hash: string;
  /** The first 11 characters: safe to display. */
  token_prefix: string;
}

export function isWellFormedOperatorToken(value: string): boolean {
  return OPERATOR_TOKEN_PATTERN.test(value);
}

/** A fresh operator token (`pds_op_…`, 256 random bits) with its id, hash and display prefix. */
export function generateOperatorToken(): GeneratedOperatorToken {
  const token = OPERATOR_TOKEN_PREFIX + randomBytes(API_KEY_BYTES).toString('base64url');
  return {
    token,
    token_id: 'tok_' + randomBytes(9).toString('base64url'),
    token_hash: hashApiKey(token),
    token_prefix: token.slice(0, OPERATOR_TOKEN_DISPLAY_LENGTH),
  };
}

export function generateSigningSecret(): string {
  return SIGNING_SECRET_PREFIX + randomBytes(SIGNING_SECRET_BYTES).toString('base64');
}

/**
 * Compares a candidate with a secret in time independent of where they differ and of whether their
 * lengths do: `timingSafeEqual` always runs over the secret's bytes (a candidate of another length is
 * refused after the secret is compared with itself). Use it for bearer tokens.
 */
export function constantTimeEqual(candidate: string, secret: string): boolean {
  return matchesSecret(secret)(candidate);
}

/**
 * `constantTimeEqual` against one secret many times. Not by hashing both sides first, as it was: the
 * operator token's SHA-256 took 2% of the API thread in the `command.append` profile (docs/benchmarks.md,
 * "`command.append` profiled"), and the length check below hides the same as hashing did.
 */
export function matchesSecret(secret: string): (candidate: string) => boolean {
  const expected = Buffer.from(secret, 'utf8');
  return (candidate) => {
    const given = Buffer.from(candidate, 'utf8');
    const sameLength = given.length === expected.length;
    return timingSafeEqual(sameLength ? given : expected, expected) && sameLength;
  };
}

/** A secret box token could not be opened: wrong key, tampered with, truncated or not a token at all. */
/** Names the secret box context of one secret of one webhook subscription. */
export const secretContext = (webhookId: string, secret: 'auth_token' | 'signing_secret') =>
  `webhook:${webhookId}:${secret}`;

export class SecretBoxError extends Error {
  override name = 'SecretBoxError';
}

export interface SecretBox {
  /**
   * Encrypts `plaintext`. `context` (optional, e.g. `webhook:<id>:auth_token`) is bound to the token as
   * associated data: decrypting needs the same context, so a token cannot be moved to another place.
   */
  encrypt(plaintext: string, context?: string): string;
  /** Decrypts a token from `encrypt`; throws `SecretBoxError` if it was tampered with or the key differs. */
  decrypt(token: string, context?: string): string;
}

const VERSION = 'v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;
const B64URL = /^[A-Za-z0-9_-]*$/;

/** AES-256-GCM with a 32-byte key (a Buffer, or a secret KeyObject such as `parseSecretKey` returns). */
export function createSecretBox(key: Buffer | KeyObject): SecretBox {
  const size = Buffer.isBuffer(key) ? key.length : key.type === 'secret' ? key.symmetricKeySize : undefined;
  if (size !== 32) throw new TypeError('the secret box needs a 32-byte key (AES-256)');
  // A private copy, so a caller reusing its buffer cannot change the key under us.
  const k = Buffer.isBuffer(key) ? Buffer.from(key) : key;

  return {
    encrypt(plaintext, context) {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', k, iv, { authTagLength: TAG_BYTES });
      if (context !== undefined) cipher.setAAD(Buffer.from(context, 'utf8'));
      const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
      const tag = cipher.getAuthTag();
      return [
        VERSION,
        iv.toString('base64url'),
        tag.toString('base64url'),
        ciphertext.toString('base64url'),
      ].join('.');
    },
    decrypt(token, context) {
      const parts = token.split('.');
      if (parts.length !== 4 || parts[0] !== VERSION || !parts.slice(1).every((p) => B64URL.test(p))) {
        throw new SecretBoxError(`not a secret box token (expected ${VERSION}.<iv>.<tag>.<ciphertext>)`);
      }
      const iv = Buffer.from(parts[1], 'base64url');
      const tag = Buffer.from(parts[2], 'base64url');
      const ciphertext = Buffer.from(parts[3], 'base64url');
      if (iv.length !== IV_BYTES || tag.length !== TAG_BYTES) {
        throw new SecretBoxError('secret box token is malformed (bad IV or tag length)');
      }
      try {
        const decipher = createDecipheriv('aes-256-gcm', k, iv, { authTagLength: TAG_BYTES });
        if (context !== undefined) decipher.setAAD(Buffer.from(context, 'utf8'));
        decipher.setAuthTag(tag);
        return Buffer.concat([decipher.update(ciphertext), decipher.final()]).toString('utf8');
      } catch {
        throw new SecretBoxError(
          'secret box token failed authentication: it was tampered with, or was sealed with another key or context',
        );
      }
    },
  };
}
