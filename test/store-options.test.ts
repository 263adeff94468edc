/**
 * How each process and thread connects to the embedded store (cli/store-options.ts): the projector
 * thread checkpoints for role `all`, and where the APIs take writes a whole turn's appends share a
 * transaction; elsewhere one callback's, until several callbacks of a turn append.
 */
import test from 'ava';
import { eventStoreOptionsOf, type StoreUser } from '../cli/store-options.ts';

const cases: Array<[string, StoreUser, boolean, string, string]> = [
  ['all, main thread, with a projector thread', { role: 'all' }, true, 'elsewhere', 'turn'],
  [
    'all, dispatcher thread, with a projector thread',
    { role: 'all', thread: 'dispatcher' },
    true,
    'elsewhere',
    'adaptive',
  ],
  ['all, projector thread', { role: 'all', thread: 'projector' }, true, 'background', 'adaptive'],
  ['all, main thread, no projector thread', { role: 'all' }, false, 'commit', 'turn'],
  [
    'all, dispatcher thread, no projector thread',
    { role: 'all', thread: 'dispatcher' },
    false,
    'commit',
    'adaptive',
  ],
  ['api process', { role: 'api' }, false, 'commit', 'turn'],
  ['dispatcher process', { role: 'dispatcher' }, false, 'commit', 'adaptive'],
  ['projector process', { role: 'projector' }, false, 'commit', 'adaptive'],
];

for (const [name, user, projectorThread, checkpoints, groupCommit] of cases) {
  test(`${name}: checkpoints ${checkpoints}, group commit ${groupCommit}`, (t) => {
    t.deepEqual(eventStoreOptionsOf(user, projectorThread), { checkpoints, groupCommit });
  });
}
