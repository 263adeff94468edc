/**
 * A behaviour double of a two-node EventStoreDB cluster, for the EventStoreDB adapter with the real
 * client: a leader and a follower, each a gRPC server (the client's own grpc-js) of the client's own
 * generated Gossip and Streams services, around one embedded store that is the cluster's log. Each node
 * does what the server's ClusterVNodeController does as leader or as non-leader:
 *
 * - Gossip.Read names both nodes and their states, so a client with `nodePreference=follower` picks
 *   the follower, as it would in a real cluster.
 * - Streams.Read of a stream: the leader reads the log as it is. The follower refuses a read that
 *   requires the leader (`requires-leader: true`) with NotLeader naming the leader (the server's
 *   RpcExceptions.LeaderInfo: NOT_FOUND with the leader's endpoint in the trailers), and serves any
 *   other read from what it has replicated.
 * - Streams.Append: the leader writes to the log, answering as Streams.Append.cs does (an idempotent
 *   repeat has no position, a wrong expected version is a reply, not an error); the follower forwards
 *   the append to the leader, or refuses it with NotLeader when it requires the leader.
 *
 * - Streams.Read of `$all` (a read, not a subscription), filtered or not: as a read of a stream.
 *
 * The follower replicates the log as it is written until `lag()`; from then on it holds the log as it
 * was, until `catchUp()`. Subscriptions and the other services are not served (UNIMPLEMENTED). Each
 * node counts what it served, forwarded and refused.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import gossipGrpc from '@eventstore/db-client/generated/gossip_grpc_pb.js';
import gossipPb from '@eventstore/db-client/generated/gossip_pb.js';
import sharedPb from '@eventstore/db-client/generated/shared_pb.js';
import streamsGrpc from '@eventstore/db-client/generated/streams_grpc_pb.js';
import streamsPb from '@eventstore/db-client/generated/streams_pb.js';
import type * as GrpcJs from '@grpc/grpc-js';
import {
  type EventMetadata,
  type EventStore,
  type ExpectedRevision,
  type NewEvent,
  type RecordedEvent,
  StreamNotFoundError,
  WrongExpectedVersionError,
} from '../../eventstore/port.ts';
import { openSqliteEventStore } from '../../eventstore/sqlite.ts';
import { eventReply, filterOf, readStart } from './esdb-replies.ts';

// The gRPC runtime the client itself loads, resolved from its own package.
const grpc = createRequire(import.meta.resolve('@eventstore/db-client'))('@grpc/grpc-js') as typeof GrpcJs;

const { ReadResp, AppendResp } = streamsPb;
const { VNodeState } = gossipPb.MemberInfo;
type ReadReq = InstanceType<typeof streamsPb.ReadReq>;
type AppendReq = InstanceType<typeof streamsPb.AppendReq>;

export interface Served {
  /** Stream reads answered (by the follower: from its replicated copy). */
  reads: number;
  /** Appends a client sent to this node: written (the leader) or forwarded to the leader (the follower). */
  appends: number;
  /** Requests refused with NotLeader. */
  refused: number;
}

export interface NodeDouble {
  readonly role: 'leader' | 'follower';
  readonly port: number;
  readonly served: Served;
}

export interface ClusterDouble {
  readonly leader: NodeDouble;
  readonly follower: NodeDouble;
  /** The cluster's log, as the leader holds it. */
  readonly log: EventStore;
  /** Streams' metadata as written to their metastreams (`$$<stream>`): every `$metadata` event's data. */
  readonly metadata: ReadonlyMap<string, unknown[]>;
  /** Both nodes as gossip seeds, the client choosing a node by `nodePreference`. */
  connectionString(nodePreference: 'leader' | 'follower' | 'random'): string;
  /** The follower stops replicating: its reads answer the log as it is now. */
  lag(): Promise<void>;
  /** The follower has replicated everything, and keeps doing so. */
  catchUp(): void;
  close(): Promise<void>;
}

interface Node extends NodeDouble {
  server: GrpcJs.Server;
}

const HOST = '127.0.0.1';

export async function startClusterDouble(): Promise<ClusterDouble> {
  const dir = mkdtempSync(join(tmpdir(), 'pds-esdb-cluster-'));
  const log = await openSqliteEventStore(join(dir, 'events.db'));
  const metadata = new Map<string, unknown[]>();
  /** The last position the follower holds; undefined: all of the log. */
  let replicatedUpTo: number | undefined;

  const nodes: Record<'leader' | 'follower', Node> = {
    leader: await startNode('leader'),
    follower: await startNode('follower'),
  };

  async function startNode(role: 'leader' | 'follower'): Promise<Node> {
    const server = new grpc.Server();
    const node = { role, port: 0, server, served: { reads: 0, appends: 0, refused: 0 } };
    server.addService(streamsGrpc.StreamsService, {
      read: (call: GrpcJs.ServerWritableStream<ReadReq, unknown>) => read(node, call),
      append: (
        call: GrpcJs.ServerReadableStream<AppendReq, unknown>,
        callback: GrpcJs.sendUnaryData<unknown>,
      ) => append(node, call, callback),
    });
    server.addService(gossipGrpc.GossipService, {
      read: (_call: unknown, callback: GrpcJs.sendUnaryData<unknown>) => callback(null, clusterInfo()),
    });
    node.port = await new Promise<number>((resolve, reject) =>
      server.bindAsync(`${HOST}:0`, grpc.ServerCredentials.createInsecure(), (err, port) =>
        err ? reject(err) : resolve(port),
      ),
    );
    return node;
  }

  function clusterInfo() {
    const info = new gossipPb.ClusterInfo();
    info.setMembersList(
      Object.values(nodes).map((node) => {
        const member = new gossipPb.MemberInfo();
        const id = new sharedPb.UUID();
        id.setString(randomUUID());
        member.setInstanceId(id);
        member.setTimeStamp(String(Date.now()));
        member.setState(node.role === 'leader' ? VNodeState.LEADER : VNodeState.FOLLOWER);
        member.setIsAlive(true);
        const endpoint = new gossipPb.EndPoint();
        endpoint.setAddress(HOST);
        endpoint.setPort(node.port);
        member.setHttpEndPoint(endpoint);
        return member;
      }),
    );
    return info;
  }

  /** RpcExceptions.LeaderInfo: what a follower answers a request that requires the leader. */
  function notLeader(): Partial<GrpcJs.StatusObject> {
    const metadata = new grpc.Metadata();
    metadata.set('exception', 'not-leader');
    metadata.set('leader-endpoint-host', HOST);
    metadata.set('leader-endpoint-port', String(nodes.leader.port));
    return { code: grpc.status.NOT_FOUND, details: 'Leader info available', metadata };
  }

  /** ServiceBase.GetRequiresLeader: the header parsed as a boolean. */
  function requiresLeader(metadata: GrpcJs.Metadata): boolean {
    const [value] = metadata.get('requires-leader');
    return String(value ?? '').toLowerCase() === 'true';
  }

  /** The stream as a node holds it: the follower, up to what it replicated. */
  async function streamOn(node: Node, streamId: string): Promise<RecordedEvent[]> {
    let events: RecordedEvent[];
    try {
      events = await log.readStream(streamId);
    } catch (err) {
      if (err instanceof StreamNotFoundError) return [];
      throw err;
    }
    const upTo = node.role === 'follower' ? replicatedUpTo : undefined;
    return upTo === undefined ? events : events.filter((e) => e.position <= upTo);
  }

  /** A read of `$all` (not a subscription) as a node answers it: the follower, from what it replicated. */
  async function allOn(node: Node, request: ReadReq): Promise<RecordedEvent[]> {
    const options = request.getOptions();
    const count = Number(options?.getCount() ?? 0);
    const { port: filter } = filterOf(request);
    const upTo = node.role === 'follower' ? replicatedUpTo : undefined;
    const from = readStart(request);
    const within = (events: RecordedEvent[]) =>
      upTo === undefined ? events : events.filter((e) => e.position <= upTo);
    if (options?.getReadDirection() === streamsPb.ReadReq.Options.ReadDirection.FORWARDS) {
      const after =
        from === 'start' ? 0 : from === 'end' ? await log.headPosition() : Number(from.commit) - 1;
      return within(await log.readAll({ after, filter, maxCount: count }));
    }
    const before =
      from === 'end'
        ? upTo === undefined
          ? undefined
          : upTo + 1
        : from === 'start'
          ? 0
          : Number(from.commit);
    return within(await log.readAll({ direction: 'backwards', before, filter, maxCount: count }));
  }

  async function read(node: Node, call: GrpcJs.ServerWritableStream<ReadReq, unknown>): Promise<void> {
    const options = call.request.getOptions();
    const stream = options?.getStream();
    if (!options || (!stream && !options.hasAll()) || options.hasSubscription()) {
      call.emit('error', { code: grpc.status.UNIMPLEMENTED, details: 'the double serves reads only' });
      return;
    }
    if (node.role === 'follower' && requiresLeader(call.metadata)) {
      node.served.refused += 1;
      call.emit('error', notLeader());
      return;
    }
    node.served.reads += 1;
    if (!stream) {
      for (const e of await allOn(node, call.request)) call.write(eventReply(e));
      call.end();
      return;
    }
    const identifier = stream.getStreamIdentifier();
    const streamId = Buffer.from(identifier?.getStreamName_asU8() ?? []).toString('utf8');
    const events = await streamOn(node, streamId);
    if (events.length === 0) {
      const notFound = new ReadResp.StreamNotFound();
      notFound.setStreamIdentifier(identifier);
      const reply = new ReadResp();
      reply.setStreamNotFound(notFound);
      call.write(reply);
      call.end();
      return;
    }
    const count = Number(options.getCount());
    const forwards = options.getReadDirection() === streamsPb.ReadReq.Options.ReadDirection.FORWARDS;
    const from = stream.hasRevision() ? Number(stream.getRevision()) : undefined;
    const chosen = forwards
      ? events.filter((e) => e.revision >= (from ?? 0))
      : events.filter((e) => from === undefined || e.revision <= from).reverse();
    for (const e of chosen.slice(0, count)) call.write(eventReply(e));
    call.end();
  }

  async function append(
    node: Node,
    call: GrpcJs.ServerReadableStream<AppendReq, unknown>,
    callback: GrpcJs.sendUnaryData<unknown>,
  ): Promise<void> {
    const requests: AppendReq[] = [];
    call.on('data', (request: AppendReq) => requests.push(request));
    await new Promise((resolve) => call.on('end', resolve));
    if (node.role === 'follower' && requiresLeader(call.metadata)) {
      node.served.refused += 1;
      callback(notLeader());
      return;
    }
    node.served.appends += 1;
    try {
      callback(null, await write(requests));
    } catch (err) {
      callback({ code: grpc.status.UNKNOWN, details: (err as Error).message });
    }
  }

  /** The leader's write, answered as Streams.Append.cs answers it. */
  async function write(requests: AppendReq[]) {
    const [header, ...proposed] = requests;
    const options = header.getOptions();
    if (!options) throw new Error('an append starts with its options');
    const streamId = Buffer.from(options.getStreamIdentifier()?.getStreamName_asU8() ?? []).toString('utf8');
    const expected: ExpectedRevision = options.hasRevision()
      ? Number(options.getRevision())
      : options.hasNoStream()
        ? 'no_stream'
        : options.hasStreamExists()
          ? 'stream_exists'
          : 'any';
    const reply = new AppendResp();
    if (streamId.startsWith('$$')) return writeMetadata(streamId.slice(2), proposed, reply);
    const events = proposed.map((r) => newEvent(r.getProposedMessage()));
    const headBefore = await log.headPosition();
    try {
      const written = await log.append(streamId, events, { expectedRevision: expected });
      const success = new AppendResp.Success();
      success.setCurrentRevision(String(written.nextExpectedRevision));
      // A repeat of a write that landed writes nothing: the server has no position for it.
      if (written.position <= headBefore) success.setNoPosition(new sharedPb.Empty());
      else {
        const position = new AppendResp.Position();
        position.setCommitPosition(String(written.position));
        position.setPreparePosition(String(written.position));
        success.setPosition(position);
      }
      reply.setSuccess(success);
    } catch (err) {
      if (!(err instanceof WrongExpectedVersionError)) throw err;
      const wrong = new AppendResp.WrongExpectedVersion();
      if (err.actual === 'no_stream') wrong.setCurrentNoStream(new sharedPb.Empty());
      else wrong.setCurrentRevision(String(err.actual));
      if (typeof expected === 'number') wrong.setExpectedRevision(String(expected));
      else if (expected === 'no_stream') wrong.setExpectedNoStream(new sharedPb.Empty());
      else if (expected === 'stream_exists') wrong.setExpectedStreamExists(new sharedPb.Empty());
      else wrong.setExpectedAny(new sharedPb.Empty());
      reply.setWrongExpectedVersion(wrong);
    }
    return reply;
  }

  /** A write to a metastream, kept beside the log (which holds no system stream); `any` expected. */
  function writeMetadata(streamId: string, proposed: AppendReq[], reply: InstanceType<typeof AppendResp>) {
    const written = metadata.get(streamId) ?? [];
    for (const r of proposed) {
      written.push(JSON.parse(Buffer.from(r.getProposedMessage()?.getData_asU8() ?? []).toString('utf8')));
    }
    metadata.set(streamId, written);
    const success = new AppendResp.Success();
    success.setCurrentRevision(String(written.length - 1));
    success.setNoPosition(new sharedPb.Empty());
    reply.setSuccess(success);
    return reply;
  }

  return {
    leader: nodes.leader,
    follower: nodes.follower,
    log,
    metadata,
    connectionString: (nodePreference) =>
      `esdb://${HOST}:${nodes.leader.port},${HOST}:${nodes.follower.port}?tls=false&nodePreference=${nodePreference}`,
    async lag() {
      replicatedUpTo = await log.headPosition();
    },
    catchUp() {
      replicatedUpTo = undefined;
    },
    async close() {
      for (const node of Object.values(nodes)) node.server.forceShutdown();
      await log.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A proposed message as the store takes it: the client sends JSON data and metadata. */
function newEvent(message: InstanceType<typeof streamsPb.AppendReq.ProposedMessage> | undefined): NewEvent {
  if (!message) throw new Error('an append carries proposed messages after its options');
  const json = (bytes: Uint8Array) => JSON.parse(Buffer.from(bytes).toString('utf8'));
  return {
    id: message.getId()?.getString(),
    type: message.getMetadataMap().get('type') ?? '',
    data: json(message.getData_asU8()),
    metadata: json(message.getCustomMetadata_asU8()) as EventMetadata,
  };
}
