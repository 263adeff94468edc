/**
 * Files a page of the service serves under `<prefix>/assets/<name>` (`/docs`, `/console`): read once,
 * from the repository or `node_modules` (no CDN), each with a content hash. A URL carrying the hash
 * (`?v=`) is cached for good and changes when the file does; without it the browser revalidates.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type Router from '@koa/router';
import type { AppContext, AppState } from './http.ts';

/** Where a served file is (`file`: its name on disk, when it differs from the served name) and its media type. */
export interface AssetFile {
  dir: string;
  type: string;
  file?: string;
}

export interface Asset {
  body: Buffer;
  type: string;
  version: string;
}

export const JAVASCRIPT = 'text/javascript; charset=utf-8';
export const CSS = 'text/css; charset=utf-8';

export class StaticAssets {
  readonly #files: Record<string, AssetFile>;
  readonly #prefix: string;
  #loading: Promise<Map<string, Asset>> | undefined;

  constructor(prefix: string, files: Record<string, AssetFile>) {
    this.#prefix = prefix;
    this.#files = files;
  }

  /** Every file, read on first use; a failed read is tried again at the next use. */
  load(): Promise<Map<string, Asset>> {
    this.#loading ??= this.#read().catch((error: unknown) => {
      this.#loading = undefined;
      throw error;
    });
    return this.#loading;
  }

  /** The versioned URL of a loaded file. */
  url(assets: Map<string, Asset>, name: string): string {
    const asset = assets.get(name);
    if (!asset) throw new Error(`no asset ${name} under ${this.#prefix}`);
    return `${this.#prefix}/assets/${name}?v=${asset.version}`;
  }

  /** `GET /assets/:name` on a router whose prefix is this one's; an unknown name falls through (404). */
  mount(router: Router<AppState>): void {
    router.get('/assets/:name', async (ctx: AppContext) => {
      const name = ctx.params['name'] as string;
      if (!Object.hasOwn(this.#files, name)) return;
      const asset = (await this.load()).get(name) as Asset;
      ctx.status = 200;
      ctx.set({
        'X-Content-Type-Options': 'nosniff',
        'Cache-Control':
          ctx.query.v === asset.version
            ? 'public, max-age=31536000, immutable'
            : 'public, max-age=0, must-revalidate',
      });
      ctx.etag = asset.version;
      ctx.type = asset.type;
      if (ctx.fresh) {
        ctx.status = 304;
        return;
      }
      ctx.body = asset.body;
    });
  }

  async #read(): Promise<Map<string, Asset>> {
    const assets = new Map<string, Asset>();
    for (const [name, { dir, type, file }] of Object.entries(this.#files)) {
      const body = await readFile(path.join(dir, file ?? name));
      const version = createHash('sha256').update(body).digest('hex').slice(0, 16);
      assets.set(name, { body, type, version });
    }
    return assets;
  }
}

/** The headers of a page of the service: its Content-Security-Policy and no framing, sniffing or referrer. */
export function pageHeaders(contentSecurityPolicy: string): Record<string, string> {
  return {
    'Content-Security-Policy': contentSecurityPolicy,
    'X-Content-Type-Options': 'nosniff',
    'X-Frame-Options': 'DENY',
    'Referrer-Policy': 'no-referrer',
    'Cache-Control': 'no-cache',
  };
}
