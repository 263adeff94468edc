/**
 * How each process and thread connects to the embedded store (cli/store-options.ts): the projector
 * thread checkpoints for role `all`, and where the APIs take writes a whole turn's appends share a
 * transaction.
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
    'callback',
  ],
  ['all, projector thread', { role: 'all', thread: 'projector' }, true, 'background', 'callback'],
  ['all, main thread, no projector thread', { role: 'all' }, false, 'commit', 'turn'],
  [
    'all, dispatcher thread, no projector thread',
    { role: 'all', thread: 'dispatcher' },
    false,
    'commit',
    'callback',
  ],
  ['api process', { role: 'api' }, false, 'commit', 'turn'],
  ['dispatcher process', { role: 'dispatcher' }, false, 'commit', 'callback'],
  ['projector process', { role: 'projector' }, false, 'commit', 'callback'],
];

for (const [name, user, projectorThread, checkpoints, groupCommit] of cases) {
  test(`${name}: checkpoints ${checkpoints}, group commit per ${groupCommit}`, (t) => {
    t.deepEqual(eventStoreOptionsOf(user, projectorThread), { checkpoints, groupCommit });
  });
}
