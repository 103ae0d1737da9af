// Quiet notices on NATS (SUBJECTS.nearQuiet; quietNodes.ts, nearSources.ts): a follower node sends
// its quiet set to every owner; each owner keeps the other nodes' latest in its QuietNodes.
import type { Subscription } from '@nats-io/transport-node';
import type { Logger } from '../log.js';
import type { Clock } from '../util/clock.js';
import { errorMessage } from '../util/errorMessage.js';
import type { NatsLink } from './natsLink.js';
import { parseQuietNotice, type QuietNodes, type QuietNotice } from './quietNodes.js';
import { SUBJECTS } from './subjects.js';

/** Sends a node's quiet set. While NATS is down nothing is relayed anyway; the next refresh tells it. */
export function quietAnnouncer(link: NatsLink, log: Logger): (notice: QuietNotice) => void {
  return (notice) => {
    if (!link.up) return;
    try {
      link.nc.publish(SUBJECTS.nearQuiet, JSON.stringify(notice));
    } catch (err) {
      log.warn('quiet notice not published', { err: errorMessage(err) });
    }
  };
}

/** Keeps the other nodes' quiet sets in `quiet` (this node's own notices are not its business). */
export function listenQuiet(link: NatsLink, self: string, quiet: QuietNodes, clock: Clock, log: Logger): Subscription {
  return link.nc.subscribe(SUBJECTS.nearQuiet, {
    callback: (err, msg) => {
      if (err) return;
      let notice: QuietNotice | undefined;
      try {
        notice = parseQuietNotice(JSON.parse(msg.string()));
      } catch {
        notice = undefined;
      }
      if (!notice) return log.warn('malformed quiet notice ignored', {});
      if (notice.node !== self) quiet.apply(notice, clock.now());
    },
  });
}
