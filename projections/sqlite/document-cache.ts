/**
 * Parsed documents of the SQLite read store's point lookups (`_id`, `findByIds`: a key's partner, a
 * menu product), so a hot document costs neither the row read nor the JSON parse (docs/read-side.md).
 *
 * Bounded by count, least recently used first out. Entries are dropped by this connection's own writes
 * and all of them when another connection commits (the store watches `data_version`). It hands the
 * same object to every reader: documents are read-only to their readers (the port's rule).
 */
import { LRUCache } from 'lru-cache';
import type { Doc, DocId } from '../read-store.ts';

export class DocumentCache {
  /** None when the capacity is 0 (caching off). */
  private readonly entries: LRUCache<string, Doc> | undefined;

  constructor(capacity: number) {
    this.entries = capacity > 0 ? new LRUCache({ max: capacity }) : undefined;
  }

  private static key(table: string, id: DocId): string {
    return `${table}\u0000${typeof id === 'number' ? 'n' : 's'}${id}`;
  }

  get(table: string, id: DocId): Doc | undefined {
    return this.entries?.get(DocumentCache.key(table, id));
  }

  set(table: string, doc: Doc): void {
    this.entries?.set(DocumentCache.key(table, doc._id), doc);
  }

  delete(table: string, id: DocId): void {
    this.entries?.delete(DocumentCache.key(table, id));
  }

  clear(): void {
    this.entries?.clear();
  }
}
