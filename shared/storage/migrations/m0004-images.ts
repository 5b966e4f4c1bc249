import { Migration } from '@mikro-orm/migrations';

/** Uploaded images (floorplans, pictures, icons), bytes included, scoped to an organization. */
export class M0004Images extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table images (
      id uuid primary key,
      organization_id uuid not null references organizations(id) on delete cascade,
      content_type text not null check (content_type in ('image/png', 'image/jpeg', 'image/webp')),
      byte_size integer not null check (byte_size > 0),
      width integer not null check (width > 0),
      height integer not null check (height > 0),
      sha256 text not null,
      original_filename text null,
      data bytea not null,
      created_at timestamptz not null default now()
    )`);
    // PNG, JPEG and WebP are compressed already: keep them out of line (TOAST) without a futile pglz pass.
    this.addSql(`alter table images alter column data set storage external`);
    this.addSql(`create index images_organization_idx on images (organization_id)`);
  }
}
