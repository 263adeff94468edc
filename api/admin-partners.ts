/**
 * Partners and their API keys (docs/write-side.md, "Partners"), on the admin router:
 * register a partner (its first key shown once), list, show, change its rate limit; issue, rotate and
 * revoke its keys. Records show key prefixes only, never a key or its hash. Writes answer once the
 * `partner_keys` read model, which authentication reads, holds them: a new key works as soon as the
 * answer that shows it arrives, and a revoked one is refused from then on.
 */
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { CommandHandler } from '../application/command-handler.ts';
import { generateApiKey } from '../application/credentials.ts';
import type { Clock } from '../domain/clock.ts';
import * as partner from '../domain/partner.ts';
import type { EventStore } from '../eventstore/port.ts';
import { PARTNERS, type PartnerDoc, toPartnerRecord } from '../projections/read-models/partner-keys.ts';
import type { Collection, ReadStore } from '../projections/read-store.ts';
import {
  partnerCreated,
  partnerKeyIssued,
  partnerKeyRevoked,
  partnerPage,
  partnerShown,
  partnerWritten,
} from './admin-records.ts';
import { type AdminRoute, adminRoute } from './admin-route-table.ts';
import { ADMIN_BASE, missingIds, uuidAfterCursor, waitForProjection } from './admin-support.ts';
import { type AppContext, HttpProblem } from './http.ts';
import { requestActor } from './operator-auth.ts';
import { ifMatch, pathUuid } from './validation.ts';
import { answerWrite, commandMetadata } from './write-support.ts';

export interface PartnerAdminDeps {
  store: EventStore;
  commands: CommandHandler;
  /** Where partners are read from (the `partners` read model) and read-your-writes waits. */
  readStore: ReadStore;
  clock: Clock;
}

const partnerParams = z.object({ id: pathUuid });
const keyParams = z.object({ id: pathUuid, key_id: partner.keyId });
const noBody = z.strictObject({});
const registration = partner.partnerFields.meta({ id: 'PartnerRegistration' });
const rateLimitBody = z
  .strictObject({ rate_limit_per_minute: partner.rateLimitPerMinute })
  .meta({ id: 'PartnerRateLimit' });
// Strict, as the partner APIs' lists are: a misspelt filter is a 400, not a silently unfiltered list.
const listQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(500).default(100),
  cursor: z.string().max(200).optional(),
  kind: partner.partnerKind.optional(),
});

/** What the routes below share. */
function partnerShared(deps: PartnerAdminDeps) {
  const { commands, clock, readStore } = deps;
  let partners: Collection<PartnerDoc> | undefined;
  const partnersCollection = async () => {
    partners ??= await readStore.collection<PartnerDoc>(PARTNERS);
    return partners;
  };
  /** A key works as soon as the answer that shows it arrives: wait until authentication can see it. */
  const seen = (position: number) => waitForProjection(readStore, 'partner_keys', position);

  async function loadPartner(id: string) {
    const loaded = await commands.load(partner.streamId(id), partner.decider);
    if (!loaded.state.exists) {
      throw new HttpProblem(404, { code: 'partner_not_found', detail: `no partner ${id}` });
    }
    return { ...loaded, state: loaded.state };
  }
  /** Runs a command on the partner's stream and waits until authentication sees it. */
  async function run(ctx: AppContext, id: string, command: partner.PartnerCommand, conditional = false) {
    const result = await commands.handle(
      partner.streamId(id),
      partner.decider,
      command,
      commandMetadata(ctx, requestActor(ctx), clock),
      conditional ? { ifMatch: ifMatch(ctx) } : {},
    );
    await seen(result.position);
    return result;
  }
  const now = () => clock.now().toISOString();
  return { partnersCollection, loadPartner, run, now, store: deps.store };
}

type Shared = ReturnType<typeof partnerShared>;

function keyRecord(state: partner.PartnerState, keyId: string) {
  if (!state.exists) throw new Error('partner vanished');
  const k = state.keys.find((x) => x.key_id === keyId);
  if (!k) throw new Error(`key ${keyId} missing after the command`);
  return {
    key_id: k.key_id,
    key_prefix: k.key_prefix,
    status: k.status,
    issued_at: k.issued_at,
    revoked_at: k.revoked_at,
  };
}

const material = (key: ReturnType<typeof generateApiKey>) => ({
  key_id: key.key_id,
  key_hash: key.key_hash,
  key_prefix: key.key_prefix,
});

/** Partners: register, list, show, change the rate limit. */
function partnerRecordRoutes({ partnersCollection, loadPartner, run, now, store }: Shared): AdminRoute[] {
  const register = adminRoute({
    method: 'post',
    path: '/partners',
    operationId: 'registerPartner',
    summary: 'Register a partner and its first API key',
    description:
      'The key is shown once. A brand partner names its brands (or `all_brands`), a store partner its ' +
      'stores; every id must exist (422).',
    body: registration,
    response: {
      status: 201,
      description: 'The partner, and its first key.',
      schema: partnerCreated,
      headers: { Location: { description: `\`${ADMIN_BASE}/partners/{id}\`.`, required: true } },
    },
    problems: [],
    async handler(ctx, { body }) {
      const partnerId = randomUUID();
      const key = generateApiKey();
      const result = await run(ctx, partnerId, {
        type: 'RegisterPartner',
        partner_id: partnerId,
        ...body,
        key: material(key),
        unknown_brand_ids: await missingIds(store, 'brand-', body.brand_ids),
        unknown_store_ids: await missingIds(store, 'store-', body.store_ids),
        at: now(),
      });
      if (!result.state.exists) throw new Error('partner registration appended no partner');
      ctx.set('Location', `${ADMIN_BASE}/partners/${partnerId}`);
      const answer = { partner: partner.toPartnerRecord(result.state), api_key: key.api_key };
      answerWrite(ctx, 201, answer, result);
    },
  });

  const list = adminRoute({
    method: 'get',
    path: '/partners',
    operationId: 'listPartners',
    summary: 'List partners',
    description: 'In partner id order; `kind` keeps one kind.',
    query: listQuery,
    response: { status: 200, description: 'A page of partners.', schema: partnerPage },
    problems: [],
    async handler(ctx, { query }) {
      const after = query.cursor ? uuidAfterCursor(query.cursor) : '';
      const found = await (await partnersCollection()).find(
        { ...(query.kind ? { kind: query.kind } : {}), ...(after ? { _id: { $gt: after } } : {}) },
        { sort: [['_id', 1]], limit: query.limit + 1 },
      );
      const page = found.slice(0, query.limit).map(toPartnerRecord);
      const next =
        found.length > query.limit
          ? Buffer.from(page[page.length - 1].partner_id).toString('base64url')
          : null;
      // The next page keeps the filter: without `kind` it would list partners of every kind.
      const kind = query.kind ? `&kind=${query.kind}` : '';
      if (next)
        ctx.set('Link', `<${ADMIN_BASE}/partners?limit=${query.limit}&cursor=${next}${kind}>; rel="next"`);
      ctx.body = { partners: page, next_cursor: next };
    },
  });

  const show = adminRoute({
    method: 'get',
    path: '/partners/{id}',
    operationId: 'getPartner',
    summary: 'One partner with its keys',
    params: partnerParams,
    response: {
      status: 200,
      description: 'The partner; its stream revision is also the `ETag`.',
      schema: partnerShown,
    },
    problems: [404],
    async handler(ctx, { params }) {
      const loaded = await loadPartner(params.id);
      ctx.set('ETag', `"${loaded.revision}"`);
      ctx.body = { partner: partner.toPartnerRecord(loaded.state), revision: loaded.revision };
    },
  });

  const change = adminRoute({
    method: 'patch',
    path: '/partners/{id}',
    operationId: 'changePartnerRateLimit',
    summary: "Change a partner's rate limit",
    description: 'Requests per minute, per key; it applies from the next request.',
    params: partnerParams,
    body: rateLimitBody,
    ifMatch: true,
    response: { status: 200, description: 'The partner as it is now.', schema: partnerWritten },
    problems: [404],
    async handler(ctx, { params, body }) {
      await loadPartner(params.id);
      const command = { type: 'ChangePartnerRateLimit', ...body, at: now() } as const;
      const result = await run(ctx, params.id, command, true);
      if (!result.state.exists) throw new Error('partner vanished');
      answerWrite(ctx, 200, { partner: partner.toPartnerRecord(result.state) }, result);
    },
  });
  return [register, list, show, change];
}

/** A partner's API keys: issue, rotate, revoke. */
function keyRoutes({ loadPartner, run, now }: Shared): AdminRoute[] {
  const issue = adminRoute({
    method: 'post',
    path: '/partners/{id}/keys',
    operationId: 'issuePartnerKey',
    summary: 'Issue another API key',
    description: "Shown once; the partner's other keys keep working.",
    params: partnerParams,
    body: noBody,
    response: { status: 201, description: 'The new key.', schema: partnerKeyIssued },
    problems: [404, 409],
    async handler(ctx, { params }) {
      await loadPartner(params.id);
      const key = generateApiKey();
      const result = await run(ctx, params.id, { type: 'IssuePartnerKey', key: material(key), at: now() });
      answerWrite(ctx, 201, { key: keyRecord(result.state, key.key_id), api_key: key.api_key }, result);
    },
  });

  const rotate = adminRoute({
    method: 'post',
    path: '/partners/{id}/keys/{key_id}/rotate',
    operationId: 'rotatePartnerKey',
    summary: 'Replace an API key',
    description: 'A new key (shown once) and the old one revoked, at the same instant.',
    params: keyParams,
    body: noBody,
    response: { status: 201, description: 'The new key.', schema: partnerKeyIssued },
    problems: [404, 409],
    async handler(ctx, { params }) {
      await loadPartner(params.id);
      const key = generateApiKey();
      const result = await run(ctx, params.id, {
        type: 'RotatePartnerKey',
        key_id: params.key_id,
        key: material(key),
        at: now(),
      });
      const answer = { key: keyRecord(result.state, key.key_id), revoked_key_id: params.key_id };
      answerWrite(ctx, 201, { ...answer, api_key: key.api_key }, result);
    },
  });

  const revoke = adminRoute({
    method: 'delete',
    path: '/partners/{id}/keys/{key_id}',
    operationId: 'revokePartnerKey',
    summary: 'Revoke an API key',
    description: 'It is refused from the moment this answer arrives.',
    params: keyParams,
    response: { status: 200, description: 'The revoked key.', schema: partnerKeyRevoked },
    problems: [404, 409],
    async handler(ctx, { params }) {
      await loadPartner(params.id);
      const result = await run(ctx, params.id, {
        type: 'RevokePartnerKey',
        key_id: params.key_id,
        at: now(),
      });
      answerWrite(ctx, 200, { key: keyRecord(result.state, params.key_id) }, result);
    },
  });
  return [issue, rotate, revoke];
}

/** The admin routes of partners and their keys. */
export function partnerRoutes(deps: PartnerAdminDeps): AdminRoute[] {
  const shared = partnerShared(deps);
  return [...partnerRecordRoutes(shared), ...keyRoutes(shared)];
}
