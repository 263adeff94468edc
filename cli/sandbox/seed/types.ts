/**
 * The shapes the sandbox seeder (`../seed.ts`) shares with its parts: the marker stream's records, what
 * a seeding is asked and what it answers.
 */
import type { KeyObject } from 'node:crypto';
import type { Clock } from '../../../domain/clock.ts';
import type * as partner from '../../../domain/partner.ts';
import type { EventStore } from '../../../eventstore/port.ts';
import type { SandboxCounts } from '../generate.ts';

/** `SandboxSeedStarted`: the parameters of a seeding, which a resumed run reuses. */
export interface Started {
  seed: number;
  size: number;
  reference_time: string;
  /** `PDS_ABANDON_AFTER` when seeding began: a resumed run plans the same abandonments. */
  abandon_after_ms: number;
  counts: SandboxCounts;
  run_id: string;
  started_at: string;
}

/** `SandboxSeeded`: a seeding that completed. */
export interface Seeded extends Started {
  seeded_at: string;
  events: number;
  seconds: number;
}

export interface SandboxPartnerCredential {
  kind: partner.PartnerKind;
  partner_id: string;
  name: string;
  brand_ids: number[];
  store_ids: number[];
  all_brands: boolean;
  key_id: string;
  key_prefix: string;
  /** The key, or null when the operator has revoked or rotated it (it is then never shown). */
  api_key: string | null;
  key_status: 'active' | 'revoked' | 'missing';
}

export interface SeedResult {
  /** `seeded`: this run wrote the sandbox (or finished an interrupted one); `already_seeded`: nothing to do. */
  outcome: 'seeded' | 'already_seeded';
  seed: number;
  size: number;
  reference_time: string;
  counts: SandboxCounts;
  /** Events this run appended. */
  events_written: number;
  /** Carts found already there (a resumed or concurrent seeding), skipped as a whole. */
  carts_skipped: number;
  seconds: number;
  partners: SandboxPartnerCredential[];
}

export interface SeedProgress {
  phase: string;
  done: number;
  total: number;
}

export interface SeedOptions {
  store: EventStore;
  /** `PDS_SECRET_KEY`: the sandbox API keys are derived from it. */
  secretKey: KeyObject;
  /** `PDS_ABANDON_AFTER`: when past carts count as abandoned (an interrupted seeding keeps its own). */
  abandonAfterMs: number;
  size?: number;
  seed?: number;
  clock?: Clock;
  onProgress?: (progress: SeedProgress) => void;
  /** Stops between two commands (the seeding resumes at the next start). */
  signal?: AbortSignal;
}
