/**
 * The end of a build's load (docs/read-side.md, "How a build writes its shadows"): each deferred index
 * of a bulk shadow is built in one statement from its documents' `keys` column, where every write
 * stored the document's entries (stored-keys.ts). SQLite sorts the entries once (through temporary
 * files: catalog.ts) and appends them to the index's B-tree leaf after leaf, instead of each commit
 * of the load rewriting the pages its documents' entries land on.
 */
import { walkFields } from '../documents.ts';
import { column, type IndexMeta, q } from './sql.ts';
import { observed, type Statements } from './statements.ts';

/**
 * Entry column `i` decoded from its JSON in the `keys` column (`entryText`): JSON null is the null
 * key (-Infinity: `-1e999` overflows to it), `{"b": hex}` a blob, strings themselves, and numbers a
 * REAL, as a write binds every number (an integer past 2^53 read as SQLite's INTEGER would be another
 * number than the document's, and never found by a query).
 */
function decoded(i: number): string {
  return (
    `CASE json_type(e.value, '$[${i}]') WHEN 'null' THEN -1e999 ` +
    `WHEN 'object' THEN unhex(e.value ->> '$[${i}].b') ` +
    `WHEN 'integer' THEN CAST(e.value ->> '$[${i}]' AS REAL) ELSE e.value ->> '$[${i}]' END`
  );
}

/** The statement that fills an index table from the documents' stored entries, in the index's order. */
export function indexBuildSql(table: string, index: IndexMeta): string {
  const fields = walkFields(index);
  const cols = fields.map((_, i) => column(i));
  const select = fields.map((_, i) => `${decoded(i)} AS ${column(i)}`);
  const order = cols.map((c, i) => `${c}${index.keys[i][1] === -1 ? ' DESC' : ''}`);
  return (
    `INSERT INTO ${q(index.table)} (${[...cols, '_id'].join(', ')}) ` +
    `SELECT ${select.join(', ')}, d._id AS _id FROM ${q(table)} AS d, ` +
    `json_each(d.keys ->> '$."${index.table}"') AS e ORDER BY ${[...order, '_id'].join(', ')}`
  );
}

/** The first key a unique index holds for two documents, read in the index's own order (no sort). */
function duplicateSql(index: IndexMeta): string {
  const cols = walkFields(index).map((_, i) => column(i));
  return `SELECT ${cols.join(', ')} FROM ${q(index.table)} GROUP BY ${cols.join(', ')} HAVING count(*) > 1 LIMIT 1`;
}

/**
 * Builds one deferred index of a collection's table and marks it built (the caller holds the
 * transaction, and records the index in the catalog). A unique index two documents share a key of
 * throws the error a write of the second would have met, and the caller's rollback leaves it deferred.
 * The flags (`multikey`, `emptyArrays`) need no pass: every write noted them, as for a live index.
 */
export function buildDeferredIndex(statements: Statements, table: string, index: IndexMeta): void {
  const sql = indexBuildSql(table, index);
  observed(statements, sql, [], false);
  statements.get(sql).run();
  if (index.unique) {
    const duplicate = statements.get(duplicateSql(index)).get() as unknown as unknown[] | undefined;
    if (duplicate) {
      throw new Error(
        `duplicate key ${JSON.stringify(duplicate)} in unique index ${walkFields(index).join(',')}`,
      );
    }
  }
  delete index.deferred;
}
