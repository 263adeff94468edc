/**
 * The stores: at real ZIP coordinates, with their reservation modes, hours and curbside settings
 * (docs/partner-api.md).
 */
import { zipCentroid } from '../../../api/partner/zip.ts';
import type { SandboxCurbsideSetting, SandboxStore } from './model.ts';
import { stream } from './rng.ts';
import { CHAINS, LOCATIONS, STREETS } from './vocabulary.ts';

const slug = (text: string) =>
  text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '');

/** Stores 1-3 are one chain's; later ones rotate through the others (another chain each time round). */
export const chainOf = (id: number) =>
  id <= 3
    ? CHAINS[0]
    : CHAINS[1 + ((id - 4 + Math.floor((id - 1) / LOCATIONS.length) * 5) % (CHAINS.length - 1))];

export function generateStores(seed: number, count: number) {
  const rng = stream(seed, 'stores');
  const stores: SandboxStore[] = [];
  const curbside: SandboxCurbsideSetting[] = [];
  for (let id = 1; id <= count; id++) {
    const loc = LOCATIONS[(id - 1) % LOCATIONS.length];
    const chain = chainOf(id);
    const centroid = zipCentroid(loc.zip);
    if (!centroid) throw new Error(`sandbox location ${loc.zip} is not a known ZIP`);
    // Store 1 offers every reservation mode, so every cart status can be reached at any size.
    const first = id === 1;
    const delivery = first || rng.chance(0.4);
    const pickup = first || !delivery || rng.chance(0.9);
    const hasCurbside = first || rng.chance(0.45);
    const open = rng.pick(['08:00', '09:00', '10:00']);
    const close = rng.pick(['20:00', '21:00', '22:00']);
    const days = ['monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday', 'sunday'] as const;
    stores.push({
      id,
      body: {
        name: `${chain} ${loc.area}`,
        display_name: rng.chance(0.7) ? `${chain} – ${loc.area}, ${loc.city}` : null,
        store_url: rng.chance(0.7)
          ? `https://${slug(`${chain} ${loc.area} ${id}`)}.pds-sandbox.example`
          : null,
        address: `${rng.int(100, 9899)} ${rng.pick(STREETS)}`,
        city: loc.city,
        state: loc.state,
        zip: loc.zip,
        // Within about half a mile of the ZIP's centroid, as a real shop would be.
        lat: Math.round((centroid.lat + rng.float(-0.007, 0.007)) * 1e6) / 1e6,
        long: Math.round((centroid.long + rng.float(-0.007, 0.007)) * 1e6) / 1e6,
        phone: `+1 ${loc.phone}-555-01${String(rng.int(0, 99)).padStart(2, '0')}`,
        recreational: rng.chance(0.95),
        medical: rng.chance(0.5),
        pickup,
        delivery,
        curbside: hasCurbside,
        working_hours: days.map((day) => ({ day, from: day === 'sunday' ? '10:00' : open, to: close })),
      },
    });
    // Curbside stores switch it on; a few others have set it up but paused it.
    if (hasCurbside || rng.chance(0.15)) {
      curbside.push({
        store_id: id,
        body: {
          enabled: hasCurbside,
          arrival_instructions: rng.pick([
            'Park in a marked curbside spot and tell us its number.',
            'Pull into the spots by the side entrance; we will bring your order out.',
            'Text us when you arrive and stay in your car.',
          ]),
          window_minutes: rng.pick([10, 15, 20, 30]),
          max_orders_per_window: rng.int(4, 12),
          payment_options: rng.sample(['cash', 'debit', 'credit', 'aeropay'], rng.int(1, 3)),
          ...(rng.chance(0.25)
            ? {
                arrival_form_fields: [
                  { name: 'vehicle_make', label: 'Vehicle make', required: true },
                  { name: 'vehicle_color', label: 'Vehicle color', required: true },
                  { name: 'parking_spot', label: 'Parking spot', required: false },
                  { name: 'phone_last4', label: 'Last 4 digits of your phone', required: false },
                ],
              }
            : {}),
        },
      });
    }
  }
  return { stores, curbside };
}
