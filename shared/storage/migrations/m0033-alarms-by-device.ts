import { Migration } from '@mikro-orm/migrations';

/**
 * A device's alarms by time: the late path reads them for every device whose fixes arrive late (its max-stay
 * alarms to weigh, and its silence DEADMANs the late fixes are evidence for, issue 30), which otherwise scanned
 * every alarm of the organization over days.
 */
export class M0033AlarmsByDevice extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create index alarms_device_idx on alarms (organization_id, device_id, created_at) where device_id is not null`);
  }
}
