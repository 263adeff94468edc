/**
 * Admin routes for webhook subscriptions (docs/webhooks.md, "Subscriptions"), mounted on the admin router:
 *
 * - `POST /webhooks` {url, auth_token, store_ids, events?} → 201 {webhook, signing_secret} (the secret
 *   is shown in this answer only; an `Idempotency-Key` replay answers `signing_secret: null`).
 * - `GET /webhooks` (`limit`, `cursor`, `store_id`, `enabled`), `GET /webhooks/{id}`.
 * - `PATCH /webhooks/{id}` {url?, auth_token?, store_ids?, events?, enabled?}.
 * - `POST /webhooks/{id}/rotate-secret` → 200 {webhook, signing_secret} (shown once; the old secret
 *   stops signing at once).
 * - `DELETE /webhooks/{id}`: final; every later command on the id answers 404.
 *
 * Secrets: the signing secret is generated here and the auth token arrives here; both are sealed with
 * the secret box (`PDS_SECRET_KEY`, AES-256-GCM, context `webhook:<id>:auth_token` /
 * `webhook:<id>:signing_secret`) before they enter a command, so an event only ever holds ciphertext.
 * No answer after the creation or rotation answer carries either one, and neither is logged.
 *
 * Reads: `GET /webhooks` lists the `webhook_subscriptions` read model; every write waits (bounded)
 * until that read model holds its event before answering, so whoever got a write's answer finds it in
 * the list. `GET /webhooks/{id}` folds the subscription's own stream, so it is always current.
 *
 * URL check (`checkWebhookUrl` of `dispatcher/url-guard.ts`, the check the dispatcher repeats before
 * every delivery, since DNS answers change): an absolute URL of at most 2048 characters without user
 * info; `https` only unless private webhook URLs are allowed (`PDS_ALLOW_PRIVATE_WEBHOOK_URLS`, by
 * default only in embedded mode), which also allows `http`; the host is resolved (at most 5 s) and
 * refused when it does not resolve, or when one of its addresses is loopback, private, shared,
 * multicast or reserved (unless private URLs are allowed) or link-local, cloud metadata or unspecified
 * (always). Refusals are 422 problems naming `url`, with the guard's `reason`; they name the host,
 * never the address it resolved to.
 */

import type { KeyObject } from 'node:crypto';
import { randomUUID } from 'node:crypto';
import type Router from '@koa/router';
import { z } from 'zod';
import { type CommandHandler, PreconditionFailedError } from '../application/command-handler.ts';
import {
  createSecretBox,
  generateSigningSecret,
  type SecretBox,
  secretContext,
} from '../application/credentials.ts';
import type { Clock } from '../domain/clock.ts';
import { oneLineText, id as storeId } from '../domain/schemas.ts';
import * as webhooks from '../domain/webhook-subscription.ts';
import type { EventStore } from '../eventstore/port.ts';
import {
  WEBHOOK_SUBSCRIPTIONS,
  type WebhookSubscriptionDoc,
} from '../projections/read-models/webhook-subscriptions.ts';
import type { Collection, Filter, ReadStore } from '../projections/read-store.ts';
import {
  checkWebhookUrl,
  defaultResolver,
  type Resolver,
  type UrlRefusalReason,
} from '../webhooks/url-guard.ts';
import { ADMIN_BASE, missingIds, waitForProjection } from './admin-support.ts';
import type { AlertThresholds } from './admin-trouble.ts';
import { type AppContext, type AppState, HttpProblem } from './http.ts';
import { requestActor } from './operator-auth.ts';
import { ifMatch, parseBody, parseParams, pathId, pathUuid } from './validation.ts';
import { answerWrite, commandMetadata } from './write-support.ts';

/** What the webhook routes need from the configuration. */
export interface WebhookSettings {
  /** `PDS_SECRET_KEY`: seals auth tokens and signing secrets before they enter any event. */
  secretKey: KeyObject;
  /** `PDS_ALLOW_PRIVATE_WEBHOOK_URLS`: allows http and private and loopback addresses (never link-local or metadata). */
  allowPrivateWebhookUrls: boolean;
  /** `PDS_WEBHOOK_TIMEOUT`: bounds a test request (`POST /webhooks/{id}/test`). */
  timeoutMs: number;
  /** Resolves a host name to its addresses (default: the system resolver, every address). */
  resolve?: Resolver;
  /**
   * `PDS_DELIVERY_LOG_RETENTION` (30 days unless said): a delivery finished longer ago is pruned, and
   * the answers that would show it say so (docs/operations.md, "Retention").
   */
  deliveryLogRetentionMs?: number;
  /** `PDS_ALERT_OLDEST_QUEUED` and the rest: when a subscription is marked failing (`admin-trouble.ts`). */
  alerts?: AlertThresholds;
}

export interface WebhookAdminDeps {
  store: EventStore;
  commands: CommandHandler;
  readStore: ReadStore;
  clock: Clock;
  webhooks: WebhookSettings;
}

/** The read model's name: the checkpoint a write waits for. */
const READ_MODEL = 'webhook_subscriptions';
const MAX_AUTH_TOKEN_LENGTH = 4096;

// ---- URL check ----------------------------------------------------------------------------------

/** Bound on resolving a webhook URL's host while a request waits. */
const RESOLVE_TIMEOUT_MS = 5_000;

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(Object.assign(new Error(`no answer within ${ms} ms`), { code: 'ETIMEOUT' })),
      ms,
    );
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** The problem code a URL refusal is answered with (the guard's own reason is in `reason`). */
function refusalCode(reason: UrlRefusalReason): string {
  switch (reason) {
    case 'invalid_url':
    case 'unsupported_scheme':
    case 'credentials_in_url':
      return 'invalid_url';
    case 'https_required':
      return 'https_required';
    case 'unresolvable':
      return 'unresolvable_url';
    default:
      return 'private_url';
  }
}

// ---- request bodies -----------------------------------------------------------------------------

/** Visible ASCII, inner spaces allowed: what an `Authorization: Bearer` header can carry unchanged. */
const authToken = z
  .string()
  .min(1)
  .max(MAX_AUTH_TOKEN_LENGTH)
  .regex(
    /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/,
    'expected printable ASCII characters, without leading or trailing spaces',
  );
const storeIds = z.array(storeId).min(1).max(webhooks.MAX_STORE_IDS);
const eventKinds = z.array(webhooks.webhookEventKind).min(1);
const url = oneLineText.min(1).max(webhooks.MAX_URL_LENGTH);

export const createWebhookBody = z.strictObject({
  url,
  auth_token: authToken,
  store_ids: storeIds,
  /** Default: every kind. */
  events: eventKinds.optional(),
});

export const changeWebhookBody = z.strictObject({
  url: url.optional(),
  auth_token: authToken.optional(),
  store_ids: storeIds.optional(),
  events: eventKinds.optional(),
  enabled: z.boolean().optional(),
});

// Strict: a misspelt filter (`?storeid=`) is a 400, not a silently unfiltered list.
const listQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(500).default(100),
  cursor: z.string().max(200).optional(),
  store_id: pathId.optional(),
  enabled: z.enum(['true', 'false']).optional(),
});

// ---- records ------------------------------------------------------------------------------------

function existing(state: webhooks.WebhookSubscriptionState): webhooks.WebhookSubscription {
  if (!state.exists) throw new Error('webhook subscription vanished after a command');
  return state;
}

// ---- routes -------------------------------------------------------------------------------------

/** Adds the webhook subscription routes to the admin router (mounted under ADMIN_BASE). */
export function webhookRoutes(router: Router<AppState>, deps: WebhookAdminDeps): void {
  const shared = subscriptionShared(deps);
  createAndListRoutes(router, shared);
  changeRoutes(router, shared);
}

type SubscriptionShared = ReturnType<typeof subscriptionShared>;

/** What the routes below share. */
function subscriptionShared(deps: WebhookAdminDeps) {
  const { store, commands, readStore, clock } = deps;
  const settings = deps.webhooks;
  const box: SecretBox = createSecretBox(settings.secretKey);
  const meta = (ctx: AppContext) => commandMetadata(ctx, requestActor(ctx), clock);
  /** Whoever gets a write's answer finds the write in `GET /webhooks`. */
  const seen = (position: number) => waitForProjection(readStore, READ_MODEL, position);
  let collection: Collection<WebhookSubscriptionDoc> | undefined;
  const subscriptions = async () => {
    collection ??= await readStore.collection<WebhookSubscriptionDoc>(WEBHOOK_SUBSCRIPTIONS);
    return collection;
  };

  const resolve = settings.resolve ?? defaultResolver;
  /** 422 unless the URL may receive webhooks (`dispatcher/url-guard.ts`, the dispatcher's own check). */
  async function checkUrl(value: string): Promise<void> {
    const refuse = (code: string, reason: string, message: string): never => {
      throw new HttpProblem(422, {
        code,
        detail: `url: ${message}`,
        errors: [{ field: 'url', message }],
        extensions: { reason },
      });
    };
    if (!webhooks.isWebhookUrl(value)) {
      refuse(
        'invalid_url',
        'invalid_url',
        `expected an absolute http or https URL of at most ${webhooks.MAX_URL_LENGTH} characters, without user name or password`,
      );
    }
    const check = await checkWebhookUrl(value, {
      allowPrivate: settings.allowPrivateWebhookUrls,
      resolve: (host) => withTimeout(resolve(host), RESOLVE_TIMEOUT_MS),
    });
    if (!check.ok) refuse(refusalCode(check.reason), check.reason, check.message);
  }

  /** The live subscription; 404 when it never existed or was removed. */
  async function loadWebhook(id: string) {
    const loaded = await commands.load(webhooks.streamId(id), webhooks.decider);
    if (!loaded.state.exists || loaded.state.removed) {
      throw new HttpProblem(404, { code: 'webhook_not_found', detail: `no webhook subscription ${id}` });
    }
    return { ...loaded, state: loaded.state };
  }

  const idParams = (params: unknown) => parseParams(params, z.object({ id: pathUuid }), 404).id;
  return {
    settings,
    box,
    meta,
    seen,
    subscriptions,
    resolve,
    checkUrl,
    loadWebhook,
    idParams,
    store,
    commands,
    readStore,
    clock,
  };
}

/** Subscriptions: create one (its signing secret shown once), list them, show one. */
function createAndListRoutes(router: Router<AppState>, shared: SubscriptionShared): void {
  const { box, meta, seen, subscriptions, checkUrl, loadWebhook, idParams, store, commands, clock } = shared;
  router.post('/webhooks', async (ctx) => {
    const body = parseBody(ctx, createWebhookBody);
    await checkUrl(body.url);
    const webhookId = randomUUID();
    const signingSecret = generateSigningSecret();
    const result = await commands.handle(
      webhooks.streamId(webhookId),
      webhooks.decider,
      {
        type: 'CreateWebhookSubscription',
        webhook_id: webhookId,
        url: body.url,
        auth_token_encrypted: box.encrypt(body.auth_token, secretContext(webhookId, 'auth_token')),
        signing_secret_encrypted: box.encrypt(signingSecret, secretContext(webhookId, 'signing_secret')),
        store_ids: body.store_ids,
        events: body.events,
        unknown_store_ids: await missingIds(store, 'store-', body.store_ids),
        at: clock.now().toISOString(),
      },
      meta(ctx),
    );
    await seen(result.position);
    ctx.set('Location', `${ADMIN_BASE}/webhooks/${webhookId}`);
    answerWrite(
      ctx,
      201,
      { webhook: webhooks.toWebhookRecord(existing(result.state)), signing_secret: signingSecret },
      result,
    );
  });

  router.get('/webhooks', async (ctx) => {
    const query = parseParams(ctx.query, listQuery);
    let after = '';
    if (query.cursor) {
      after = Buffer.from(query.cursor, 'base64url').toString('utf8');
      if (!pathUuid.safeParse(after).success) {
        throw new HttpProblem(400, {
          code: 'invalid_cursor',
          detail: 'the cursor is not one this API gave out',
        });
      }
    }
    const filter: Filter = {};
    if (query.store_id !== undefined) filter.store_ids = query.store_id;
    if (query.enabled !== undefined) filter.enabled = query.enabled === 'true';
    const found = await (await subscriptions()).find(filter, {
      sort: [['_id', 1]],
      limit: query.limit + 1,
      ...(after ? { after: [after] } : {}),
    });
    const page = found.slice(0, query.limit).map((doc) => webhooks.toWebhookRecord(doc));
    const next =
      found.length > query.limit ? Buffer.from(page[page.length - 1].webhook_id).toString('base64url') : null;
    if (next) {
      // The next page keeps the filters.
      const params = new URLSearchParams({ limit: String(query.limit), cursor: next });
      if (query.store_id !== undefined) params.set('store_id', String(query.store_id));
      if (query.enabled !== undefined) params.set('enabled', query.enabled);
      ctx.set('Link', `<${ADMIN_BASE}/webhooks?${params}>; rel="next"`);
    }
    ctx.body = { webhooks: page, next_cursor: next };
  });

  router.get('/webhooks/:id', async (ctx) => {
    const loaded = await loadWebhook(idParams(ctx.params));
    ctx.set('ETag', `"${loaded.revision}"`);
    ctx.body = { webhook: webhooks.toWebhookRecord(loaded.state), revision: loaded.revision };
  });
}

/** Subscriptions: change one, rotate its secret, remove it. */
function changeRoutes(router: Router<AppState>, shared: SubscriptionShared): void {
  const { box, meta, seen, checkUrl, loadWebhook, idParams, store, commands, clock } = shared;
  router.patch('/webhooks/:id', async (ctx) => {
    const id = idParams(ctx.params);
    const body = parseBody(ctx, changeWebhookBody);
    const expected = ifMatch(ctx);
    const loaded = await loadWebhook(id);
    if (expected !== undefined && expected !== loaded.revision) {
      throw new PreconditionFailedError(webhooks.streamId(id), expected, loaded.revision);
    }
    const current = loaded.state;
    // The URL is checked before any append, and the change (which the decider may refuse: unknown
    // stores) is appended before an enable or disable: a refusal appends nothing.
    if (body.url !== undefined && body.url !== current.url) await checkUrl(body.url);
    let authTokenEncrypted: string | undefined;
    if (body.auth_token !== undefined && !sameSecret(box, current, body.auth_token)) {
      authTokenEncrypted = box.encrypt(body.auth_token, secretContext(id, 'auth_token'));
    }
    const unknownStoreIds =
      body.store_ids === undefined ? undefined : await missingIds(store, 'store-', body.store_ids);

    let result: { state: webhooks.WebhookSubscriptionState; revision: number; position: number } = {
      state: current,
      revision: loaded.revision,
      position: loaded.position,
    };
    let conditional = expected;
    const changes =
      body.url !== undefined ||
      authTokenEncrypted !== undefined ||
      body.store_ids !== undefined ||
      body.events !== undefined;
    if (changes) {
      result = await commands.handle(
        webhooks.streamId(id),
        webhooks.decider,
        {
          type: 'ChangeWebhookSubscription',
          url: body.url,
          auth_token_encrypted: authTokenEncrypted,
          store_ids: body.store_ids,
          events: body.events,
          unknown_store_ids: unknownStoreIds,
          at: clock.now().toISOString(),
        },
        meta(ctx),
        { ifMatch: conditional },
      );
      conditional = undefined;
    }
    if (body.enabled !== undefined) {
      const at = clock.now().toISOString();
      result = await commands.handle(
        webhooks.streamId(id),
        webhooks.decider,
        body.enabled
          ? { type: 'EnableWebhookSubscription', at }
          : { type: 'DisableWebhookSubscription', reason: 'operator', at },
        meta(ctx),
        { ifMatch: conditional },
      );
    }
    await seen(result.position);
    answerWrite(ctx, 200, { webhook: webhooks.toWebhookRecord(existing(result.state)) }, result);
  });

  router.post('/webhooks/:id/rotate-secret', async (ctx) => {
    const id = idParams(ctx.params);
    parseBody(ctx, z.strictObject({}));
    await loadWebhook(id);
    const signingSecret = generateSigningSecret();
    const result = await commands.handle(
      webhooks.streamId(id),
      webhooks.decider,
      {
        type: 'RotateWebhookSigningSecret',
        signing_secret_encrypted: box.encrypt(signingSecret, secretContext(id, 'signing_secret')),
        at: clock.now().toISOString(),
      },
      meta(ctx),
      { ifMatch: ifMatch(ctx) },
    );
    await seen(result.position);
    answerWrite(
      ctx,
      200,
      { webhook: webhooks.toWebhookRecord(existing(result.state)), signing_secret: signingSecret },
      result,
    );
  });

  router.delete('/webhooks/:id', async (ctx) => {
    const id = idParams(ctx.params);
    await loadWebhook(id);
    const result = await commands.handle(
      webhooks.streamId(id),
      webhooks.decider,
      { type: 'RemoveWebhookSubscription', at: clock.now().toISOString() },
      meta(ctx),
      { ifMatch: ifMatch(ctx) },
    );
    await seen(result.position);
    const state = existing(result.state);
    answerWrite(ctx, 200, { webhook_id: id, removed: true, removed_at: state.removed_at }, result);
  });
}

/** Whether `token` is the subscription's current auth token (a token that cannot be opened is not). */
function sameSecret(box: SecretBox, state: webhooks.WebhookSubscription, token: string): boolean {
  try {
    return box.decrypt(state.auth_token_encrypted, secretContext(state.webhook_id, 'auth_token')) === token;
  } catch {
    return false;
  }
}
