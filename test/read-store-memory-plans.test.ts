import test from 'ava';
import { createMemoryReadStore } from '../projections/memory-read-store.ts';
import { type Item, planCases } from './support/read-store-plans.ts';

planCases(test, 'memory', (indexes) => createMemoryReadStore().collection<Item>('items', indexes));
