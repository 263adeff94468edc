/**
 * Which of a group's settings the EventStoreDB adapter counts as outdated (eventstore/esdb/persistent.ts),
 * on the info the client itself maps from the gRPC message the server sends: the server reports each
 * setting as it was created (its PersistentSubscriptionStats and ParseSubscriptionInfo), so a group
 * this adapter made must show none, else every dispatcher start would update it, and EventStoreDB
 * restarts a group it updates. The round trip on a real server is in the contract run.
 */
import { mapPersistentSubscriptionToAllInfo } from '@eventstore/db-client/dist/persistentSubscription/utils/mapPersistentSubscriptionInfo.js';
import persistentPb from '@eventstore/db-client/generated/persistent_pb.js';
import test from 'ava';
import { outdatedSettings } from '../../eventstore/esdb/persistent.ts';

interface Made {
  strategy: string;
  checkPointAfterMs: number;
  minCheckPointCount: number;
}

/** A group's info as the server sends it for a group created with these settings (the rest the client's defaults). */
function reported(made: Made) {
  const info = new persistentPb.SubscriptionInfo();
  info.setEventSource('$all');
  info.setGroupName('webhook-fan-out');
  info.setStatus('Live');
  info.setStartFrom('C:0/P:0');
  info.setResolveLinkTos(false);
  info.setExtraStatistics(false);
  info.setMessageTimeoutMilliseconds(30_000);
  info.setMaxRetryCount(2_147_483_647);
  info.setLiveBufferSize(500);
  info.setBufferSize(500);
  info.setReadBatchSize(20);
  info.setCheckPointAfterMilliseconds(made.checkPointAfterMs);
  info.setMinCheckPointCount(made.minCheckPointCount);
  info.setMaxCheckPointCount(1_000);
  info.setNamedConsumerStrategy(made.strategy);
  info.setMaxSubscriberCount(0); // unbounded
  info.setLastCheckpointedEventPosition('C:1200/P:1200');
  info.setLastKnownEventPosition('C:1300/P:1300');
  info.setTotalItems('0');
  info.setCountSinceLastMeasurement('0');
  info.setLiveBufferCount('0');
  info.setParkedMessageCount('0');
  return mapPersistentSubscriptionToAllInfo(info).settings;
}

test('a group made as this adapter makes them has nothing outdated', (t) => {
  t.deepEqual(
    outdatedSettings(reported({ strategy: 'Pinned', checkPointAfterMs: 250, minCheckPointCount: 1 })),
    [],
  );
});

test('a group made with the client’s defaults (round robin, checkpoints after 2 s and 10 messages) has those outdated', (t) => {
  t.deepEqual(
    outdatedSettings(
      reported({ strategy: 'RoundRobin', checkPointAfterMs: 2_000, minCheckPointCount: 10 }),
    ).sort(),
    ['checkPointAfter', 'checkPointLowerBound', 'consumerStrategyName'],
  );
});
