/** Brand aggregate (`brand-<id>`): a brand's name. Renaming propagates to every read model that copies it. */
import { z } from 'zod';
import { type Decider, invalid } from './decider.ts';
import { defineEvent, type EventOf } from './events.ts';
import { id, isoDateTime, nonEmpty } from './schemas.ts';

export const streamId = (brandId: number) => `brand-${brandId}`;

export const brandFields = z.strictObject({ name: nonEmpty(200) });

export const events = {
  BrandUpserted: defineEvent(
    'BrandUpserted',
    z.object({ brand_id: id, name: z.string(), upserted_at: isoDateTime }),
  ),
};
export type BrandEvent = EventOf<typeof events>;

export type BrandCommand = {
  type: 'UpsertBrand';
  brand_id: number;
  fields: z.infer<typeof brandFields>;
  at: string;
};

export type BrandState =
  | { exists: false }
  | { exists: true; brand_id: number; name: string; updated_at: string };

export const decider: Decider<BrandCommand, BrandEvent, BrandState> = {
  initialState: { exists: false },
  decide(command, state) {
    if (command.fields.name.length === 0) throw invalid('invalid_name', 'a brand needs a name');
    // An upsert that changes nothing appends nothing, so retries and replays are harmless.
    if (state.exists && state.name === command.fields.name) return [];
    return [
      events.BrandUpserted({
        brand_id: command.brand_id,
        name: command.fields.name,
        upserted_at: command.at,
      }),
    ];
  },
  evolve(_state, event) {
    switch (event.type) {
      case 'BrandUpserted':
        return {
          exists: true,
          brand_id: event.data.brand_id,
          name: event.data.name,
          updated_at: event.data.upserted_at,
        };
    }
  },
};

export function toRecord(state: BrandState) {
  return state.exists ? { id: state.brand_id, name: state.name, updated_at: state.updated_at } : null;
}
