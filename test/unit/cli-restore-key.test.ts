// `tagw restore`'s secret-key lines (src/cli/commands/dataActions.ts): the key found now comes first,
// with whether it is the backup's; the backup's own key is a line of its own. One line that named the
// backup's key file and then said it DIFFERS from the backup's read as if that file were the key in
// use (a restore into /tmp/x named /srv/a/secret.key, the machine the backup came from).
import { expect, it } from 'vitest';
import { restoreKeyLines } from '../../src/cli/commands/dataActions.js';

const backupKey = { location: '/srv/a/secret.key', fingerprint: 'aaaa' };
const found = { location: '/srv/b/secret.key', fingerprint: 'bbbb' };

it('names the key found now first, then the backup\'s, whether they match or not', () => {
  expect(restoreKeyLines({ ...backupKey, matches: false, found })).toEqual([
    ['secret key', "/srv/b/secret.key (fingerprint bbbb): DIFFERS from the backup's: broker passwords will not decrypt (restore the backup's key, or start with SECRET_KEY_RESET=1 and bind the accounts again)"],
    ["backup's secret key", '/srv/a/secret.key (fingerprint aaaa)'],
  ]);
  expect(restoreKeyLines({ ...backupKey, fingerprint: 'bbbb', matches: true, found })[0]).toEqual(['secret key', "/srv/b/secret.key (fingerprint bbbb): the backup's"]);
  expect(restoreKeyLines({ location: '/srv/a/secret.key', fingerprint: null, matches: null, found: { location: '/srv/b/secret.key', fingerprint: null } })).toEqual([
    ['secret key', "/srv/b/secret.key (no key yet): unknown whether it is the backup's (no fingerprint recorded, or no key found)"],
    ["backup's secret key", '/srv/a/secret.key (no fingerprint recorded)'],
  ]);
});
