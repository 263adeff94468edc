import test from 'ava';
import { openSqliteReadStore } from '../projections/sqlite/read-store.ts';
import { type Item, planCases } from './support/read-store-plans.ts';

planCases(test, 'sqlite', (indexes) => openSqliteReadStore(':memory:').collection<Item>('items', indexes));
