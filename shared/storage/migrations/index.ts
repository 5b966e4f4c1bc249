import type { MigrationObject } from '@mikro-orm/core';
import { M0001OrganizationsAndUsers } from './m0001-organizations-and-users.js';
import { M0002Identity } from './m0002-identity.js';
import { M0003Cartography } from './m0003-cartography.js';
import { M0004Images } from './m0004-images.js';
import { M0005Positions } from './m0005-positions.js';
import { M0006DetectionAndAlarms } from './m0006-detection-and-alarms.js';
import { M0007CredentialRevocation } from './m0007-credential-revocation.js';
import { M0008AlarmRaiseKeys } from './m0008-alarm-raise-keys.js';
import { M0010AuditLog } from './m0010-audit-log.js';
import { M0009Webhooks } from './m0009-webhooks.js';
import { M0011ReportStays } from './m0011-report-stays.js';
import { M0012ReportRollups } from './m0012-report-rollups.js';
import { M0013GeofenceStaysVersions } from './m0013-geofence-stays-versions.js';
import { M0014GeofenceStaysDayOrder } from './m0014-geofence-stays-day-order.js';
import { M0016AlarmSubjectKey } from './m0016-alarm-subject-key.js';
import { M0017WebhookLanes } from './m0017-webhook-lanes.js';
import { M0018SilenceStormsAndContact } from './m0018-silence-storms-and-contact.js';
import { M0019AlarmTriage } from './m0019-alarm-triage.js';
import { M0020RefreshTokenFamilies } from './m0020-refresh-token-families.js';
import { M0021DetectionDeadLetters } from './m0021-detection-dead-letters.js';
import { M0022TokenFamiliesAndOrganizationEmails } from './m0022-token-families-and-organization-emails.js';
import { M0023Evacuations } from './m0023-evacuations.js';
import { M0024Privacy } from './m0024-privacy.js';
import { M0025ZoneEventTime } from './m0025-zone-event-time.js';
import { M0030PrivacySettings } from './m0030-privacy-settings.js';
import { M0031OrganizationRetention } from './m0031-organization-retention.js';
import { M0033AlarmsByDevice } from './m0033-alarms-by-device.js';
import { M0034PositionsTimeBrin } from './m0034-positions-time-brin.js';
import { M0035AlarmRaiseRecords } from './m0035-alarm-raise-records.js';

/**
 * Every migration, in order. Listed explicitly (not globbed from disk) so they run the same under tsx,
 * compiled output and tests. Append only: never edit a migration that has shipped.
 */
export const migrationsList: MigrationObject[] = [
  { name: 'm0001-organizations-and-users', class: M0001OrganizationsAndUsers },
  { name: 'm0002-identity', class: M0002Identity },
  { name: 'm0003-cartography', class: M0003Cartography },
  { name: 'm0004-images', class: M0004Images },
  { name: 'm0005-positions', class: M0005Positions },
  { name: 'm0006-detection-and-alarms', class: M0006DetectionAndAlarms },
  { name: 'm0007-credential-revocation', class: M0007CredentialRevocation },
  { name: 'm0008-alarm-raise-keys', class: M0008AlarmRaiseKeys },
  { name: 'm0009-webhooks', class: M0009Webhooks },
  { name: 'm0010-audit-log', class: M0010AuditLog },
  { name: 'm0011-report-stays', class: M0011ReportStays },
  { name: 'm0012-report-rollups', class: M0012ReportRollups },
  { name: 'm0013-geofence-stays-versions', class: M0013GeofenceStaysVersions },
  { name: 'm0014-geofence-stays-day-order', class: M0014GeofenceStaysDayOrder },
  { name: 'm0016-alarm-subject-key', class: M0016AlarmSubjectKey },
  { name: 'm0017-webhook-lanes', class: M0017WebhookLanes },
  { name: 'm0018-silence-storms-and-contact', class: M0018SilenceStormsAndContact },
  { name: 'm0019-alarm-triage', class: M0019AlarmTriage },
  { name: 'm0020-refresh-token-families', class: M0020RefreshTokenFamilies },
  { name: 'm0021-detection-dead-letters', class: M0021DetectionDeadLetters },
  { name: 'm0022-token-families-and-organization-emails', class: M0022TokenFamiliesAndOrganizationEmails },
  { name: 'm0023-evacuations', class: M0023Evacuations },
  { name: 'm0024-privacy', class: M0024Privacy },
  { name: 'm0025-zone-event-time', class: M0025ZoneEventTime },
  { name: 'm0030-privacy-settings', class: M0030PrivacySettings },
  { name: 'm0031-organization-retention', class: M0031OrganizationRetention },
  { name: 'm0033-alarms-by-device', class: M0033AlarmsByDevice },
  { name: 'm0034-positions-time-brin', class: M0034PositionsTimeBrin },
  { name: 'm0035-alarm-raise-records', class: M0035AlarmRaiseRecords },
];
