/**
 * Console sessions (docs/operations.md, "The console"): signing in exchanges an operator token for a
 * session id, which the browser keeps in an HttpOnly cookie, so no script of the page can read a
 * credential. Sessions are documents in a read store collection of their own, so they survive a
 * restart and every `api` replica sharing the store (MongoDB) knows them.
 *
 * Only hashes are stored: the SHA-256 of the session id (the document's `_id`) and of its CSRF token.
 * The CSRF token is an HMAC of the session id, so whoever holds the cookie can be given it again (a
 * page reload) without it being kept anywhere, and nobody can make it without the id.
 *
 * A session ends at the first of: its absolute lifetime, its idle timeout, sign-out, or the person's
 * `OperatorAuthenticator.current()` saying no more (token revoked or expired, account disabled), which
 * is asked at every request, so a role change applies at the next one.
 */
import { createHmac, hash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Clock } from '../domain/clock.ts';
import type { Collection, Doc, ReadStore } from '../projections/read-store.ts';
import type { OperatorAuthenticator, OperatorPrincipal } from './operator-principal.ts';

/** The collection sessions are kept in. */
export const CONSOLE_SESSIONS = 'console_sessions';

/** 256 random bits, base64url: what the cookie holds. */
const SESSION_ID = /^[A-Za-z0-9_-]{43}$/;
const SESSION_ID_BYTES = 32;

export interface SessionLifetime {
  /** From sign-in to the session's end, whatever happens meanwhile. */
  absoluteMs: number;
  /** A session unused this long ends. */
  idleMs: number;
}

interface SessionDoc extends Doc {
  /** SHA-256 of the session id, hex. */
  _id: string;
  /** SHA-256 of the CSRF token, hex. */
  csrf_hash: string;
  /** The person as they signed in: what `current()` is asked about. */
  operator: OperatorPrincipal;
  /** Times in epoch milliseconds. */
  created_at: number;
  expires_at: number;
  last_seen_at: number;
  /** When the session ends if unused: the earlier of `expires_at` and `last_seen_at` + idle time. */
  ends_at: number;
}

/** A live session, as a request finds it. */
export interface ConsoleSession {
  /** The person as they stand now (`OperatorAuthenticator.current`). */
  operator: OperatorPrincipal;
  /** The token the page sends in `X-CSRF-Token` with every write. */
  csrf_token: string;
  /** The absolute end. */
  expires_at: Date;
  /** When it ends unless used before. */
  idle_expires_at: Date;
  /** Whether `token` is this session's CSRF token (constant time). */
  acceptsCsrf(token: string): boolean;
}

/** A session just started: its id goes into the cookie, never anywhere else. */
export interface StartedSession extends ConsoleSession {
  id: string;
}

const sha256 = (text: string) => hash('sha256', text, 'hex');

/** The session's CSRF token: an HMAC keyed by the session id, so only the id's holder can have it. */
const csrfTokenOf = (id: string) =>
  createHmac('sha256', id).update('pds console csrf token').digest('base64url');

function matchesHash(candidate: string, expectedHex: string): boolean {
  const given = Buffer.from(sha256(candidate), 'hex');
  const expected = Buffer.from(expectedHex, 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

export class ConsoleSessions {
  readonly lifetime: SessionLifetime;
  readonly #sessions: Collection<SessionDoc>;
  readonly #operators: OperatorAuthenticator;
  readonly #clock: Clock;
  /** How long a use may go unrecorded: a write per request would be a write per console poll. */
  readonly #touchEveryMs: number;

  private constructor(
    sessions: Collection<SessionDoc>,
    operators: OperatorAuthenticator,
    clock: Clock,
    lifetime: SessionLifetime,
  ) {
    this.#sessions = sessions;
    this.#operators = operators;
    this.#clock = clock;
    this.lifetime = lifetime;
    this.#touchEveryMs = Math.min(60_000, Math.floor(lifetime.idleMs / 10));
  }

  /** The sessions kept in `store`'s `console_sessions` collection. */
  static async open(
    store: ReadStore,
    operators: OperatorAuthenticator,
    clock: Clock,
    lifetime: SessionLifetime,
  ): Promise<ConsoleSessions> {
    const sessions = await store.collection<SessionDoc>(CONSOLE_SESSIONS, [{ keys: [['ends_at', 1]] }]);
    return new ConsoleSessions(sessions, operators, clock, lifetime);
  }

  /**
   * A new session for `operator`. The ones that have ended are removed first, so the collection holds
   * the live sessions and those ended since the last sign-in, not every sign-in ever made.
   */
  async start(operator: OperatorPrincipal): Promise<StartedSession> {
    const now = this.#clock.now().getTime();
    await this.#sessions.bulkWrite([{ deleteMany: { filter: { ends_at: { $lte: now } } } }]);
    const id = randomBytes(SESSION_ID_BYTES).toString('base64url');
    const csrf = csrfTokenOf(id);
    const expiresAt = now + this.lifetime.absoluteMs;
    const doc: SessionDoc = {
      _id: sha256(id),
      csrf_hash: sha256(csrf),
      operator: { ...operator },
      created_at: now,
      expires_at: expiresAt,
      last_seen_at: now,
      ends_at: Math.min(expiresAt, now + this.lifetime.idleMs),
    };
    await this.#sessions.bulkWrite([
      { replaceOne: { filter: { _id: doc._id }, replacement: doc, upsert: true } },
    ]);
    return { id, ...this.#live(doc, operator, csrf) };
  }

  /**
   * The live session `id` names, with the person as they stand now; `undefined` when there is none:
   * never started, signed out, expired, idle too long, or its person's token or account is no longer
   * valid (such a session is removed).
   */
  async resume(id: string): Promise<ConsoleSession | undefined> {
    if (!SESSION_ID.test(id)) return undefined;
    const [doc] = await this.#sessions.findByIds([sha256(id)]);
    if (!doc) return undefined;
    const now = this.#clock.now().getTime();
    const operator = doc.ends_at > now ? await this.#operators.current(doc.operator) : undefined;
    if (operator === undefined) {
      await this.#sessions.bulkWrite([{ deleteOne: { filter: { _id: doc._id } } }]);
      return undefined;
    }
    let seen = doc;
    if (now - doc.last_seen_at >= this.#touchEveryMs) {
      const endsAt = Math.min(doc.expires_at, now + this.lifetime.idleMs);
      seen = { ...doc, last_seen_at: now, ends_at: endsAt };
      await this.#sessions.bulkWrite([
        { updateOne: { filter: { _id: doc._id }, update: { $set: { last_seen_at: now, ends_at: endsAt } } } },
      ]);
    }
    return this.#live(seen, operator, csrfTokenOf(id));
  }

  /** Ends the session `id` names (sign-out); nothing happens for one that does not exist. */
  async end(id: string): Promise<void> {
    if (!SESSION_ID.test(id)) return;
    await this.#sessions.bulkWrite([{ deleteOne: { filter: { _id: sha256(id) } } }]);
  }

  #live(doc: SessionDoc, operator: OperatorPrincipal, csrf: string): ConsoleSession {
    const csrfHash = doc.csrf_hash;
    return {
      operator,
      csrf_token: csrf,
      expires_at: new Date(doc.expires_at),
      idle_expires_at: new Date(doc.ends_at),
      acceptsCsrf: (token) => matchesHash(token, csrfHash),
    };
  }
}
