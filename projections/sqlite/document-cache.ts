/**
 * Parsed documents of the SQLite read store's point lookups (`_id`, `findByIds`: a key's partner, a
 * menu product), so a hot document costs neither the row read nor the JSON parse (docs/read-side.md).
 *
 * Bounded by count, least recently used first out. Entries are dropped by this connection's own writes
 * and all of them when another connection commits (the store watches `data_version`). It hands the
 * same object to every reader: documents are read-only to their readers (the port's rule).
 */
import type { Doc, DocId } from '../read-store.ts';

export class DocumentCache {
  private readonly entries = new Map<string, Doc>();
  private readonly capacity: number;

  constructor(capacity: number) {
    this.capacity = capacity;
  }

  private static key(table: string, id: DocId): string {
    return `${table}\u0000${typeof id === 'number' ? 'n' : 's'}${id}`;
  }

  get(table: string, id: DocId): Doc | undefined {
    const key = DocumentCache.key(table, id);
    const doc = this.entries.get(key);
    if (doc) {
      this.entries.delete(key); // most recently used goes last
      this.entries.set(key, doc);
    }
    return doc;
  }

  set(table: string, doc: Doc): void {
    if (this.capacity <= 0) return;
    const key = DocumentCache.key(table, doc._id);
    this.entries.delete(key);
    this.entries.set(key, doc);
    if (this.entries.size > this.capacity) this.entries.delete(this.entries.keys().next().value as string);
  }

  delete(table: string, id: DocId): void {
    this.entries.delete(DocumentCache.key(table, id));
  }

  clear(): void {
    this.entries.clear();
  }
}
