/**
 * The customer key store contract (`application/customer-keys.ts`): the embedded `keys.db` and
 * MongoDB's collections must pass these cases unchanged. Each case opens a store of its own.
 */
import { randomUUID } from 'node:crypto';
import type { TestFn } from 'ava';
import type { CustomerKeyStore, StoredCustomerKey } from '../../application/customer-keys.ts';

export interface OpenedKeyStore {
  store: CustomerKeyStore;
  cleanup: () => Promise<void>;
}

const key = (n: number): StoredCustomerKey => ({
  key_id: `ck_${n}_${randomUUID().slice(0, 8)}`,
  wrapped: `v1.wrapped-${n}`,
  created_at: `2026-03-01T00:00:0${n}.000Z`,
});

export function keyStoreContract(test: TestFn, name: string, open: () => Promise<OpenedKeyStore>): void {
  const withStore = (title: string, body: (store: CustomerKeyStore) => Promise<void>) =>
    test(`${name}: ${title}`, async (t) => {
      const { store, cleanup } = await open();
      t.teardown(cleanup);
      await body(store);
      t.pass();
    });

  test(`${name}: a key is stored once and found by its id and by each of its links, with all its links`, async (t) => {
    const { store, cleanup } = await open();
    t.teardown(cleanup);
    const k = key(1);
    t.true(await store.createKey(k, ['cart:a', 'email:h1']));
    t.false(await store.createKey({ ...k, wrapped: 'v1.another' }, ['cart:b']), 'stored once');
    await store.addLinks(k.key_id, ['user:h2', 'cart:a']);
    t.deepEqual(await store.key(k.key_id), { key: k });
    t.is(await store.key('ck_none'), null);
    const expected = [{ key_id: k.key_id, links: ['cart:a', 'email:h1', 'user:h2'] }];
    t.deepEqual(await store.keysLinkedTo(['user:h2']), expected);
    t.deepEqual(await store.keysLinkedTo(['cart:a', 'email:h1', 'cart:z']), expected);
    t.deepEqual(await store.keysLinkedTo(['cart:z']), []);
    t.deepEqual(await store.keysLinkedTo([]), []);
  });

  test(`${name}: keys sharing a link are listed in the order they were created`, async (t) => {
    const { store, cleanup } = await open();
    t.teardown(cleanup);
    const [first, second] = [key(1), key(2)];
    await store.createKey(first, ['email:h']);
    await store.createKey(second, ['email:h', 'cart:b']);
    t.deepEqual(
      (await store.keysLinkedTo(['email:h'])).map((k) => k.key_id),
      [first.key_id, second.key_id],
    );
  });

  test(`${name}: asked for the last keys of a link, it answers the last made, in creation order, and no more`, async (t) => {
    const { store, cleanup } = await open();
    t.teardown(cleanup);
    // Ids against their creation order, so that neither the id nor the link text orders them.
    const made = [key(1), key(2), key(3), key(4)].map((k, i) => ({
      ...k,
      key_id: `ck_${'zyxw'[i]}_${k.key_id}`,
    }));
    for (const [i, k] of made.entries()) await store.createKey(k, [`cart:${'dcba'[i]}`, 'phone:shared']);
    await store.createKey(key(5), ['cart:e', 'phone:other']);
    const ids = (found: { key_id: string }[]) => found.map((k) => k.key_id);
    t.deepEqual(ids(await store.keysLinkedTo(['phone:shared'], 2)), [made[2].key_id, made[3].key_id]);
    t.deepEqual(await store.keysLinkedTo(['phone:shared'], 1), [
      { key_id: made[3].key_id, links: ['cart:a', 'phone:shared'] },
    ]);
    t.deepEqual(ids(await store.keysLinkedTo(['phone:shared'], 10)), ids(made), 'fewer than asked: all');
    t.deepEqual(ids(await store.keysLinkedTo(['phone:shared'])), ids(made));
  });

  test(`${name}: a destroyed key leaves its tombstone, naming its erasure, and loses its links; the others stay`, async (t) => {
    const { store, cleanup } = await open();
    t.teardown(cleanup);
    const [gone, kept] = [key(1), key(2)];
    await store.createKey(gone, ['cart:a', 'email:h']);
    await store.createKey(kept, ['cart:b', 'email:h']);
    const erasure = { erasure_id: randomUUID(), erased_at: '2026-03-02T00:00:00.000Z' };
    t.deepEqual(await store.destroyKeys([gone.key_id], erasure), { wiped: true });
    const tombstone = { key_id: gone.key_id, cart_uuid: 'a', ...erasure };
    t.deepEqual(await store.key(gone.key_id), { tombstone });
    t.deepEqual(await store.keysLinkedTo(['cart:a']), []);
    t.deepEqual(await store.keysLinkedTo(['email:h']), [
      { key_id: kept.key_id, links: ['cart:b', 'email:h'] },
    ]);
    // Destroyed again by a later erasure: the first tombstone stands.
    await store.destroyKeys([gone.key_id], {
      erasure_id: randomUUID(),
      erased_at: '2026-03-03T00:00:00.000Z',
    });
    t.deepEqual(await store.key(gone.key_id), { tombstone });
    t.deepEqual(await store.key(kept.key_id), { key: kept });
    t.deepEqual(await store.tombstonesOfCart('a'), [tombstone]);
    t.deepEqual(await store.tombstonesOfCart('b'), []);
  });

  test(`${name}: neither adding links to nor creating a destroyed key brings it back`, async (t) => {
    const { store, cleanup } = await open();
    t.teardown(cleanup);
    const gone = key(1);
    await store.createKey(gone, ['cart:a']);
    const erasure = { erasure_id: randomUUID(), erased_at: '2026-03-02T00:00:00.000Z' };
    await store.destroyKeys([gone.key_id], erasure);
    await store.addLinks(gone.key_id, ['email:h', 'cart:a']);
    t.false(await store.createKey(gone, ['cart:a', 'user:u']));
    t.deepEqual(await store.key(gone.key_id), {
      tombstone: { key_id: gone.key_id, cart_uuid: 'a', ...erasure },
    });
    t.deepEqual(await store.keysLinkedTo(['cart:a', 'email:h', 'user:u']), []);
    // A key never stored gets no links either.
    await store.addLinks('ck_never', ['cart:z']);
    t.is(await store.key('ck_never'), null);
    t.deepEqual(await store.keysLinkedTo(['cart:z']), []);
  });

  test(`${name}: keys and erasures made within the same millisecond are listed in the order they were made`, async (t) => {
    const { store, cleanup } = await open();
    t.teardown(cleanup);
    const made = [key(1), key(1), key(1)].map((k, i) => ({ ...k, key_id: `ck_${'zma'[i]}_${k.key_id}` }));
    for (const k of made) await store.createKey(k, ['email:same']);
    t.deepEqual(
      (await store.keysLinkedTo(['email:same'])).map((k) => k.key_id),
      made.map((k) => k.key_id),
    );
    const requested_at = '2026-03-01T00:00:00.000Z';
    const begun = ['e-z', 'e-m', 'e-a'].map((id) => ({
      erasure_id: `${id}-${randomUUID()}`,
      key_ids: [],
      cart_uuids: [],
      requested_at,
    }));
    for (const e of begun) await store.beginErasure(e);
    t.deepEqual(await store.pendingErasures(), begun);
  });

  test(`${name}: a key never stored reads as null beside destroyed ones, not as a tombstone`, async (t) => {
    const { store, cleanup } = await open();
    t.teardown(cleanup);
    const k = key(1);
    await store.createKey(k, ['cart:a']);
    await store.destroyKeys([k.key_id], { erasure_id: randomUUID(), erased_at: '2026-03-02T00:00:00.000Z' });
    t.is(await store.key(`${k.key_id}x`), null);
    t.is(await store.key('ck_never'), null);
    await store.destroyKeys([], { erasure_id: randomUUID(), erased_at: '2026-03-02T00:00:00.000Z' });
    t.is(await store.key('ck_never'), null);
  });

  test(`${name}: an erasure is pending from its beginning to its finish, once however often it begins`, async (t) => {
    const { store, cleanup } = await open();
    t.teardown(cleanup);
    const erasure = {
      erasure_id: randomUUID(),
      key_ids: ['ck_1'],
      cart_uuids: [randomUUID()],
      requested_at: '2026-03-01T00:00:00.000Z',
    };
    const later = { ...erasure, erasure_id: randomUUID(), requested_at: '2026-03-01T00:00:01.000Z' };
    await store.beginErasure(erasure);
    await store.beginErasure(erasure);
    await store.beginErasure(later);
    t.deepEqual(await store.pendingErasures(), [erasure, later]);
    await store.finishErasure(erasure.erasure_id);
    t.deepEqual(await store.pendingErasures(), [later]);
  });

  withStore('closing twice is harmless', async (store) => {
    await store.close();
  });
}
