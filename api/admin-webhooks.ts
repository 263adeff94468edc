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
 * URL check (`admin-webhook-url.ts`: `checkWebhookUrl` of `dispatcher/url-guard.ts`, the check the dispatcher repeats before
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
import type { Resolver } from '../webhooks/url-guard.ts';
import {
  webhookCreated,
  webhookPage,
  webhookRemoved,
  webhookSecretRotated,
  webhookShown,
  webhookWritten,
} from './admin-records.ts';
import { type AdminRoute, adminRoute } from './admin-route-table.ts';
import { ADMIN_BASE, missingIds, uuidAfterCursor, waitForProjection } from './admin-support.ts';
import type { AlertThresholds } from './admin-trouble.ts';
import { checkSubscriptionUrl } from './admin-webhook-url.ts';
import { type AppContext, HttpProblem } from './http.ts';
import { requestActor } from './operator-auth.ts';
import { ifMatch, pathId, pathUuid } from './validation.ts';
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

export const createWebhookBody = z
  .strictObject({
    url,
    auth_token: authToken,
    store_ids: storeIds,
    /** Default: every kind. */
    events: eventKinds.optional().describe('The kinds of webhook sent to it; every kind when left out.'),
  })
  .meta({ id: 'WebhookCreation' });

export const changeWebhookBody = z
  .strictObject({
    url: url.optional(),
    auth_token: authToken.optional(),
    store_ids: storeIds.optional(),
    events: eventKinds.optional(),
    enabled: z.boolean().optional(),
  })
  .meta({ id: 'WebhookChange' });

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

/** The webhook subscription routes of the admin router. */
export function webhookRoutes(deps: WebhookAdminDeps): AdminRoute[] {
  const shared = subscriptionShared(deps);
  return [...createAndListRoutes(shared), ...changeRoutes(shared)];
}

type SubscriptionShared = ReturnType<typeof subscriptionShared>;

/** What the routes below share. */
function subscriptionShared(deps: WebhookAdminDeps) {
  const { store, commands, readStore, clock } = deps;
  const settings = deps.webhooks;
  // Built at the first write: the admin API's document builds the tables without the secret key.
  let sealed: SecretBox | undefined;
  const box = () => {
    sealed ??= createSecretBox(settings.secretKey);
    return sealed;
  };
  const meta = (ctx: AppContext) => commandMetadata(ctx, requestActor(ctx), clock);
  /** Whoever gets a write's answer finds the write in `GET /webhooks`. */
  const seen = (position: number) => waitForProjection(readStore, READ_MODEL, position);
  let collection: Collection<WebhookSubscriptionDoc> | undefined;
  const subscriptions = async () => {
    collection ??= await readStore.collection<WebhookSubscriptionDoc>(WEBHOOK_SUBSCRIPTIONS);
    return collection;
  };

  const checkUrl = (value: string) => checkSubscriptionUrl(value, settings);

  /** The live subscription; 404 when it never existed or was removed. */
  async function loadWebhook(id: string) {
    const loaded = await commands.load(webhooks.streamId(id), webhooks.decider);
    if (!loaded.state.exists || loaded.state.removed) {
      throw new HttpProblem(404, { code: 'webhook_not_found', detail: `no webhook subscription ${id}` });
    }
    return { ...loaded, state: loaded.state };
  }

  return { box, meta, seen, subscriptions, checkUrl, loadWebhook, store, commands, clock };
}

const idParams = z.object({ id: pathUuid });
const noBody = z.strictObject({});

/** Subscriptions: create one (its signing secret shown once), list them, show one. */
function createAndListRoutes(shared: SubscriptionShared): AdminRoute[] {
  const { box, meta, seen, subscriptions, checkUrl, loadWebhook, store, commands, clock } = shared;
  const create = adminRoute({
    method: 'post',
    path: '/webhooks',
    operationId: 'createWebhook',
    summary: 'Subscribe a receiver to webhooks',
    description:
      'The URL is checked as the dispatcher checks it before every delivery (422 naming `url`, with ' +
      "the guard's `reason`). The signing secret is shown in this answer only; the auth token and the " +
      'secret are stored sealed, and no later answer carries either.',
    body: createWebhookBody,
    response: {
      status: 201,
      description: 'The subscription, and its signing secret.',
      schema: webhookCreated,
      headers: { Location: { description: `\`${ADMIN_BASE}/webhooks/{id}\`.`, required: true } },
    },
    problems: [],
    async handler(ctx, { body }) {
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
          auth_token_encrypted: box().encrypt(body.auth_token, secretContext(webhookId, 'auth_token')),
          signing_secret_encrypted: box().encrypt(signingSecret, secretContext(webhookId, 'signing_secret')),
          store_ids: body.store_ids,
          events: body.events,
          unknown_store_ids: await missingIds(store, 'store-', body.store_ids),
          at: clock.now().toISOString(),
        },
        meta(ctx),
      );
      await seen(result.position);
      ctx.set('Location', `${ADMIN_BASE}/webhooks/${webhookId}`);
      const webhook = webhooks.toWebhookRecord(existing(result.state));
      answerWrite(ctx, 201, { webhook, signing_secret: signingSecret }, result);
    },
  });

  const list = adminRoute({
    method: 'get',
    path: '/webhooks',
    operationId: 'listWebhooks',
    summary: 'List webhook subscriptions',
    description: 'In id order; `store_id` keeps those of a store, `enabled` those enabled or not.',
    query: listQuery,
    response: { status: 200, description: 'A page of subscriptions.', schema: webhookPage },
    problems: [],
    async handler(ctx, { query }) {
      const after = query.cursor ? uuidAfterCursor(query.cursor) : '';
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
        found.length > query.limit
          ? Buffer.from(page[page.length - 1].webhook_id).toString('base64url')
          : null;
      if (next) {
        // The next page keeps the filters.
        const params = new URLSearchParams({ limit: String(query.limit), cursor: next });
        if (query.store_id !== undefined) params.set('store_id', String(query.store_id));
        if (query.enabled !== undefined) params.set('enabled', query.enabled);
        ctx.set('Link', `<${ADMIN_BASE}/webhooks?${params}>; rel="next"`);
      }
      ctx.body = { webhooks: page, next_cursor: next };
    },
  });

  const show = adminRoute({
    method: 'get',
    path: '/webhooks/{id}',
    operationId: 'getWebhook',
    summary: 'One webhook subscription',
    description: "Folded from the subscription's own stream: always current.",
    params: idParams,
    response: {
      status: 200,
      description: 'The subscription; its stream revision is also the `ETag`.',
      schema: webhookShown,
    },
    problems: [404],
    async handler(ctx, { params }) {
      const loaded = await loadWebhook(params.id);
      ctx.set('ETag', `"${loaded.revision}"`);
      ctx.body = { webhook: webhooks.toWebhookRecord(loaded.state), revision: loaded.revision };
    },
  });
  return [create, list, show];
}

/** Subscriptions: change one, rotate its secret, remove it. */
function changeRoutes(shared: SubscriptionShared): AdminRoute[] {
  const { box, meta, seen, checkUrl, loadWebhook, store, commands, clock } = shared;
  const change = adminRoute({
    method: 'patch',
    path: '/webhooks/{id}',
    operationId: 'changeWebhook',
    summary: 'Change, disable or enable a webhook subscription',
    description:
      'Fields left out stay as they are; a new `url` is checked as on creation. Enabling a ' +
      'subscription the dispatcher disabled sends its deliveries again from then on.',
    params: idParams,
    body: changeWebhookBody,
    ifMatch: true,
    response: { status: 200, description: 'The subscription as it is now.', schema: webhookWritten },
    problems: [404],
    async handler(ctx, { params, body }) {
      const { id } = params;
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
      if (body.auth_token !== undefined && !sameSecret(box(), current, body.auth_token)) {
        authTokenEncrypted = box().encrypt(body.auth_token, secretContext(id, 'auth_token'));
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
    },
  });

  const rotate = adminRoute({
    method: 'post',
    path: '/webhooks/{id}/rotate-secret',
    operationId: 'rotateWebhookSecret',
    summary: "Replace a subscription's signing secret",
    description: 'The new secret is shown once; the old one stops signing at once.',
    params: idParams,
    body: noBody,
    ifMatch: true,
    response: {
      status: 200,
      description: 'The subscription, and its new signing secret.',
      schema: webhookSecretRotated,
    },
    problems: [404],
    async handler(ctx, { params }) {
      const { id } = params;
      await loadWebhook(id);
      const signingSecret = generateSigningSecret();
      const result = await commands.handle(
        webhooks.streamId(id),
        webhooks.decider,
        {
          type: 'RotateWebhookSigningSecret',
          signing_secret_encrypted: box().encrypt(signingSecret, secretContext(id, 'signing_secret')),
          at: clock.now().toISOString(),
        },
        meta(ctx),
        { ifMatch: ifMatch(ctx) },
      );
      await seen(result.position);
      const webhook = webhooks.toWebhookRecord(existing(result.state));
      answerWrite(ctx, 200, { webhook, signing_secret: signingSecret }, result);
    },
  });

  const remove = adminRoute({
    method: 'delete',
    path: '/webhooks/{id}',
    operationId: 'removeWebhook',
    summary: 'Remove a webhook subscription',
    description: 'Final: every later request naming it answers 404, and nothing more is sent to it.',
    params: idParams,
    ifMatch: true,
    response: { status: 200, description: 'The subscription, removed.', schema: webhookRemoved },
    problems: [404],
    async handler(ctx, { params }) {
      const { id } = params;
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
    },
  });
  return [change, rotate, remove];
}

/** Whether `token` is the subscription's current auth token (a token that cannot be opened is not). */
function sameSecret(box: SecretBox, state: webhooks.WebhookSubscription, token: string): boolean {
  try {
    return box.decrypt(state.auth_token_encrypted, secretContext(state.webhook_id, 'auth_token')) === token;
  } catch {
    return false;
  }
}
