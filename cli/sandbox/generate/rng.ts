/**
 * The generator's randomness: a hand-rolled PRNG (sfc32 seeded through cyrb128), and one named stream
 * per part of the data, so a change to one part does not reshuffle the others.
 */

/** cyrb128: a string hashed into the four 32-bit words that seed sfc32. */
function cyrb128(text: string): [number, number, number, number] {
  let h1 = 1779033703;
  let h2 = 3144134277;
  let h3 = 1013904242;
  let h4 = 2773480762;
  for (let i = 0; i < text.length; i++) {
    const k = text.charCodeAt(i);
    h1 = h2 ^ Math.imul(h1 ^ k, 597399067);
    h2 = h3 ^ Math.imul(h2 ^ k, 2869860233);
    h3 = h4 ^ Math.imul(h3 ^ k, 951274213);
    h4 = h1 ^ Math.imul(h4 ^ k, 2716044179);
  }
  h1 = Math.imul(h3 ^ (h1 >>> 18), 597399067);
  h2 = Math.imul(h4 ^ (h2 >>> 22), 2869860233);
  h3 = Math.imul(h1 ^ (h3 >>> 17), 951274213);
  h4 = Math.imul(h2 ^ (h4 >>> 19), 2716044179);
  h1 ^= h2 ^ h3 ^ h4;
  h2 ^= h1;
  h3 ^= h1;
  h4 ^= h1;
  return [h1 >>> 0, h2 >>> 0, h3 >>> 0, h4 >>> 0];
}

export interface Rng {
  /** A uniform 32-bit unsigned integer. */
  uint32(): number;
  /** Uniform in [0, 1). */
  next(): number;
  /** A whole number from `min` to `max`, both included. */
  int(min: number, max: number): number;
  float(min: number, max: number): number;
  chance(p: number): boolean;
  pick<T>(items: readonly T[]): T;
  weighted<T>(entries: readonly (readonly [T, number])[]): T;
  /** `n` distinct items, in random order (all of them when `n` ≥ their count). */
  sample<T>(items: readonly T[], n: number): T[];
  /** An RFC 9562 version 4 UUID made of PRNG bits (not random to an attacker: ids, never secrets). */
  uuid(): string;
}

/** sfc32 (Chris Doty-Humphrey's Small Fast Counting generator) on a seed hashed by cyrb128. */
export function createRng(seed: string): Rng {
  let [a, b, c, d] = cyrb128(seed);
  const uint32 = (): number => {
    const t = (((a + b) | 0) + d) | 0;
    d = (d + 1) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    c = (c + t) | 0;
    return t >>> 0;
  };
  // The first outputs still show the seed's structure.
  for (let i = 0; i < 15; i++) uint32();
  const next = () => uint32() / 4294967296;
  const rng: Rng = {
    uint32,
    next,
    int: (min, max) => min + Math.floor(next() * (max - min + 1)),
    float: (min, max) => min + next() * (max - min),
    chance: (p) => next() < p,
    pick: (items) => items[Math.floor(next() * items.length)],
    weighted(entries) {
      const total = entries.reduce((sum, [, w]) => sum + w, 0);
      let r = next() * total;
      for (const [value, w] of entries) {
        r -= w;
        if (r < 0) return value;
      }
      return entries[entries.length - 1][0];
    },
    sample(items, n) {
      const copy = [...items];
      const count = Math.min(n, copy.length);
      for (let i = 0; i < count; i++) {
        const j = i + Math.floor(next() * (copy.length - i));
        [copy[i], copy[j]] = [copy[j], copy[i]];
      }
      return copy.slice(0, count);
    },
    uuid() {
      const bytes = Buffer.alloc(16);
      for (let i = 0; i < 16; i += 4) bytes.writeUInt32BE(uint32(), i);
      bytes[6] = (bytes[6] & 0x0f) | 0x40;
      bytes[8] = (bytes[8] & 0x3f) | 0x80;
      const hex = bytes.toString('hex');
      return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
    },
  };
  return rng;
}

/** The stream a part of the sandbox (`stores`, `carts`, …) draws from: one per (seed, name). */
export const stream = (seed: number, name: string) => createRng(`pds-sandbox:${seed}:${name}`);
