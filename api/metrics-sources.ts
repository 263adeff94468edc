/**
 * Metrics of this process's other threads (the dispatcher and projector threads, `cli/role-thread.ts`) shown by
 * this thread's `/metrics`. A family both threads report (`pds_subscription_up`, one series per
 * subscription) is merged by label set with prom-client's cluster aggregation; every other family is
 * printed as this thread's registry has it (the aggregation would drop e.g. the process start time).
 */
import { AggregatorRegistry, type Registry } from 'prom-client';

export type MetricsSnapshot = Awaited<ReturnType<Registry['getMetricsAsJSON']>>;
/** Another thread's metrics; a source that fails or times out adds nothing to that scrape. */
export type MetricsSource = () => Promise<MetricsSnapshot>;

export class MetricsSources {
  readonly #sources: MetricsSource[] = [];

  add(source: MetricsSource): void {
    this.#sources.push(source);
  }

  /** The Prometheus text of `registry` with the sources' families merged in. */
  async render(registry: Registry): Promise<string> {
    const others = (await Promise.all(this.#sources.map((source) => source().catch(() => [])))).filter(
      (snapshot) => snapshot.length > 0,
    );
    if (others.length === 0) return registry.metrics();
    const shared = new Set(others.flat().map((metric) => metric.name));
    const own = await registry.getMetricsAsJSON();
    const merged = AggregatorRegistry.aggregate([own.filter((m) => shared.has(m.name)), ...others]);
    const alone = registry
      .getMetricsAsArray()
      .filter((metric) => !shared.has(metric.name))
      .map((metric) => registry.getSingleMetricAsString(metric.name));
    return `${[...(await Promise.all(alone)), (await merged.metrics()).trimEnd()].join('\n\n')}\n`;
  }
}
