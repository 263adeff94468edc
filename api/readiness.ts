/**
 * The readiness checks `/readyz` runs (docs/operations.md, "Health"): what each component of a role
 * registers, whether the role requires it or is only degraded while it fails, and the report.
 */

/**
 * A check's answer: true (ok) or false (failing), or `standby`: the component stands by for another
 * process that does its work (a projector while another holds the read store's lease), which counts
 * as ready and is shown as such.
 */
export type CheckAnswer = boolean | 'standby';

export type ReadinessCheck = () => CheckAnswer | Promise<CheckAnswer>;

/**
 * What a failing check means for the process's role (docs/operations.md, "Health"): `required`, the
 * process cannot do what its role is for and must get no traffic (`/readyz` 503); `degraded`, it still
 * serves, with less (a write path, the freshness of a read), and `/readyz` answers 200 naming it.
 */
export type CheckImpact = 'required' | 'degraded';

export interface CheckOptions {
  /** `required` unless said otherwise. */
  impact?: CheckImpact;
}

/** One check of a group: its answer, alone (the group's impact) or with an impact of its own. */
export type GroupCheck = CheckAnswer | { ok: CheckAnswer; impact: CheckImpact };

export interface ReadinessReport {
  /** No required check fails, and the process is not stopping. */
  ready: boolean;
  /** True once the process began to stop: never ready again. */
  stopping: boolean;
  checks: Record<string, 'ok' | 'failing' | 'standby'>;
  /** Names of the failing required checks: the process is not ready while there is one. */
  failing: string[];
  /** Names of the failing checks that only degrade the role: the process stays ready. */
  degraded: string[];
  /** Each check's impact (a role thread passes them on to its parent). */
  impacts: Record<string, CheckImpact>;
  /** Why a check threw or timed out, for logs only (may name internals). */
  errors: Record<string, string>;
}

export interface Readiness {
  /** Registers a named check; the process is ready when every required check returns true. */
  add(name: string, check: ReadinessCheck, options?: CheckOptions): void;
  /**
   * Registers checks that come and go (one per subscription): `checks()` answers each one's name and
   * whether it passes; each is reported as `<name>:<its name>`.
   */
  addEach(name: string, checks: () => Record<string, GroupCheck>, options?: CheckOptions): void;
  check(): Promise<ReadinessReport>;
  /** Reports not-ready from now on, so load balancers stop sending requests during shutdown. */
  markStopping(): void;
}

export function createReadiness(options: { timeoutMs?: number } = {}): Readiness {
  const timeoutMs = options.timeoutMs ?? 2_000;
  const checks = new Map<string, { check: ReadinessCheck; impact: CheckImpact }>();
  const groups = new Map<string, { each: () => Record<string, GroupCheck>; impact: CheckImpact }>();
  let stopping = false;

  async function run(check: ReadinessCheck): Promise<{ ok: CheckAnswer; error?: string }> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      const answer = await Promise.race([Promise.resolve().then(check), timeout]);
      return { ok: answer === 'standby' ? answer : answer === true };
    } catch (error) {
      return { ok: false, error: error instanceof Error ? error.message : String(error) };
    } finally {
      clearTimeout(timer);
    }
  }

  return {
    add(name, check, { impact = 'required' } = {}) {
      if (checks.has(name)) throw new Error(`readiness check ${name} is already registered`);
      checks.set(name, { check, impact });
    },
    addEach(name, each, { impact = 'required' } = {}) {
      if (groups.has(name)) throw new Error(`readiness checks ${name} are already registered`);
      groups.set(name, { each, impact });
    },
    async check() {
      const names = [...checks.keys()];
      const results = await Promise.all(names.map((name) => run(checks.get(name)!.check)));
      const report: ReadinessReport = {
        ready: !stopping,
        stopping,
        checks: {},
        failing: [],
        degraded: [],
        impacts: {},
        errors: {},
      };
      const record = (name: string, ok: CheckAnswer, impact: CheckImpact) => {
        report.checks[name] = ok === 'standby' ? ok : ok ? 'ok' : 'failing';
        report.impacts[name] = impact;
        if (ok) return;
        if (impact === 'degraded') {
          report.degraded.push(name);
        } else {
          report.ready = false;
          report.failing.push(name);
        }
      };
      names.forEach((name, i) => {
        const { ok, error } = results[i];
        record(name, ok, checks.get(name)!.impact);
        if (error) report.errors[name] = error;
      });
      for (const [group, { each, impact }] of groups) {
        for (const [name, state] of Object.entries(each())) {
          if (typeof state !== 'object') record(`${group}:${name}`, state, impact);
          else record(`${group}:${name}`, state.ok, state.impact);
        }
      }
      return report;
    },
    markStopping() {
      stopping = true;
    },
  };
}
