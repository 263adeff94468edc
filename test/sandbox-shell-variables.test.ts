/**
 * `pds sandbox seed --env`: the sandbox's API keys as shell variables, one per partner kind (README,
 * "The first five minutes"), which a shell can `eval`.
 */
import { execFileSync } from 'node:child_process';
import test from 'ava';
import type { SandboxPartnerCredential } from '../cli/sandbox/seed/types.ts';
import { sandboxShellVariables } from '../cli/sandbox/seed.ts';

function credential(kind: SandboxPartnerCredential['kind'], apiKey: string | null): SandboxPartnerCredential {
  return {
    kind,
    partner_id: `partner-of-${kind}`,
    name: kind,
    brand_ids: [],
    store_ids: [],
    all_brands: false,
    key_id: `key_${kind}`,
    key_prefix: `pds_key_${kind.slice(0, 4)}`,
    api_key: apiKey,
    key_status: apiKey ? 'active' : 'revoked',
  };
}

test('one variable per partner kind, set in a shell by eval', (t) => {
  const text = sandboxShellVariables({
    partners: [
      credential('brand', 'pds_key_brand-AAA_1'),
      credential('brand_feed', 'pds_key_feed-BBB_2'),
      credential('store_operator', 'pds_key_store-CCC_3'),
      credential('store_menu_feed', 'pds_key_menu-DDD_4'),
    ],
  });
  const out = execFileSync(
    'bash',
    [
      '-c',
      `eval "$1"; echo "$BRAND_KEY $BRAND_FEED_KEY $STORE_OPERATOR_KEY $STORE_MENU_FEED_KEY"`,
      '_',
      text,
    ],
    { encoding: 'utf8' },
  );
  t.is(out.trim(), 'pds_key_brand-AAA_1 pds_key_feed-BBB_2 pds_key_store-CCC_3 pds_key_menu-DDD_4');
});

test('a revoked key is never shown: a comment says how to issue one, and its variable stays unset', (t) => {
  const text = sandboxShellVariables({
    partners: [credential('brand', 'pds_key_brand-AAA_1'), credential('store_operator', null)],
  });
  t.is(
    text.split('\n')[1],
    '# STORE_OPERATOR_KEY: pds_key_stor… is revoked; issue a new key with pds partners keys issue partner-of-store_operator',
  );
  const out = execFileSync(
    'bash',
    ['-c', `eval "$1"; echo "[$BRAND_KEY][\${STORE_OPERATOR_KEY-unset}]"`, '_', text],
    {
      encoding: 'utf8',
    },
  );
  t.is(out.trim(), '[pds_key_brand-AAA_1][unset]');
});
