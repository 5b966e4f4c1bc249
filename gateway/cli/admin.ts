import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { CredentialService } from '../auth/credential-service.js';
import { TokenService, loadJwtSecret } from '../auth/token-service.js';
import { ConfigError, loadConfig, type Config } from '../../shared/config.js';
import { createLogger } from '../../shared/logger.js';
import { generatePassword, hashPassword } from '../../shared/passwords.js';
import { materializations } from '../../shared/reports/materializations.js';
import { ReportMaterializer } from '../../shared/reports/materializer.js';
import { DataDirInUseError, lockDataDir, lockDataDirOrExit } from '../../shared/storage/data-dir-lock.js';
import { openStorage } from '../../shared/storage/index.js';
import {
  API_KEY_PERMISSIONS,
  OrganizationSchema,
  ROLES,
  UserSchema,
  type ApiKeyPermission,
  type Role,
} from '../../shared/storage/entities/index.js';

const usage = `Usage: npm run admin -- <command> [options]

Commands:
  create-user    --email E [--password P] [--role admin|user_manager|user] [--full-name N] [--organization ID]
                 Creates a user (in the first organization unless --organization). Prints the password if generated.
  create-apikey  --email E [--permission read-only|read-write|positioning] [--description D]
                 Creates an API key for the user with that e-mail and prints it (the only time it is shown).
  reset-password --email E [--password P] [--url URL]
                 Sets a new password (prints it if generated) and signs the user out everywhere. While a gateway
                 (or the demo) holds DATA_DIR, it goes through that gateway's API, at URL (default
                 http://127.0.0.1:$PORT), with a 2-minute token it mints with the signing key; only for an
                 administrator or user manager then. Otherwise it writes storage directly.
  list-organizations
                 Prints every organization's id and name.
  backfill-reports --from ISO --to ISO [--organization ID]
                 Rebuilds the data reports keep (geofence stays) for positions stored in [from, to): for
                 positions stored behind the materializer (imported straight into the table). Safe to run
                 beside a gateway or worker on a server database: a rebuild replaces what it rebuilds.

It uses the same environment as the gateway (DATABASE_URL, DATA_DIR, ...). With embedded storage it refuses
while a gateway (or the demo) has DATA_DIR open: embedded PostgreSQL has one writer. Stop it first, or do the
same through its API (POST /api/v1/users, POST /api/v1/auth/apikeys); reset-password goes through it by itself.`;

/** Printed when DATA_DIR is held: what to do instead. */
const inUseHint =
  'Stop that gateway first, or do the same through its API: POST /api/v1/users, POST /api/v1/auth/apikeys (see docs/access.md).';

class UsageError extends Error {}

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  const { values } = parseArgs({
    args: rest,
    options: {
      email: { type: 'string' },
      password: { type: 'string' },
      role: { type: 'string', default: 'user' },
      'full-name': { type: 'string', default: '' },
      organization: { type: 'string' },
      permission: { type: 'string', default: 'read-only' },
      description: { type: 'string', default: '' },
      from: { type: 'string' },
      to: { type: 'string' },
      url: { type: 'string' },
    },
  });
  if (!command || command === 'help' || command === '--help') {
    process.stdout.write(`${usage}\n`);
    return;
  }
  const config = loadConfig();
  const logger = createLogger('warn', { service: 'admin-cli' });
  if (command === 'reset-password') {
    if (!values.email) throw new UsageError('--email is required');
    if (values.password !== undefined && values.password.length < 8) throw new UsageError('--password needs at least 8 characters');
    const held = dataDirHolder(config);
    if (held !== undefined) {
      const url = values.url ?? `http://${config.HOST === '0.0.0.0' || config.HOST === '::' ? '127.0.0.1' : config.HOST}:${config.PORT}`;
      const password = values.password ?? generatePassword();
      await resetPasswordThroughApi(config, url, values.email, password);
      process.stdout.write(`reset the password of ${values.email.toLowerCase()} through the gateway at ${url} (pid ${held})\n`);
      if (!values.password) process.stdout.write(`password: ${password}\n`);
      return;
    }
  }
  const lock = lockDataDirOrExit(config, inUseHint);
  const storage = await openStorage(config, logger);
  // Printed only once storage closed cleanly: "created" is never said of something that was not stored.
  const lines: string[] = [];
  const print = (line: string) => lines.push(line);
  try {
    const em = storage.em();
    if (command === 'list-organizations') {
      for (const organization of await em.find(OrganizationSchema, {}, { orderBy: { createdAt: 'asc' } })) {
        print(`${organization.id}\t${organization.name}\n`);
      }
    } else if (command === 'create-user') {
      if (!values.email) throw new UsageError('--email is required');
      if (!ROLES.includes(values.role as Role)) throw new UsageError(`--role must be one of ${ROLES.join(', ')}`);
      const organization = values.organization
        ? await em.findOne(OrganizationSchema, { id: values.organization })
        : (await em.find(OrganizationSchema, {}, { orderBy: { createdAt: 'asc' }, limit: 1 }))[0];
      if (!organization) throw new UsageError('no such organization (run list-organizations)');
      const password = values.password ?? generatePassword();
      if (password.length < 8) throw new UsageError('--password needs at least 8 characters');
      const user = em.create(UserSchema, {
        id: randomUUID(),
        organization,
        email: values.email.toLowerCase(),
        passwordHash: await hashPassword(password),
        fullName: values['full-name'] ?? '',
        role: values.role as Role,
        platformAdmin: false,
        buildingIds: [],
        createdAt: new Date(),
        updatedAt: new Date(),
      });
      await em.flush();
      print(`created user ${user.id} (${user.email}, ${user.role}) in ${organization.name}\n`);
      if (!values.password) print(`password: ${password}\n`);
    } else if (command === 'create-apikey') {
      if (!values.email) throw new UsageError('--email is required');
      if (!API_KEY_PERMISSIONS.includes(values.permission as ApiKeyPermission))
        throw new UsageError(`--permission must be one of ${API_KEY_PERMISSIONS.join(', ')}`);
      const user = await em.findOne(UserSchema, { email: values.email.toLowerCase() });
      if (!user) throw new UsageError(`no user with e-mail ${values.email}`);
      const credentials = new CredentialService(storage, new TokenService(loadJwtSecret(config), config.JWT_TTL_SECONDS), config);
      const { apiKey, key } = await credentials.createApiKey(user, values.permission as ApiKeyPermission, values.description ?? '');
      print(`created ${apiKey.permission} API key ${apiKey.id} for ${user.email}\napikey: ${key}\n`);
    } else if (command === 'reset-password') {
      const user = await em.findOne(UserSchema, { email: values.email!.toLowerCase() });
      if (!user) throw new UsageError(`no user with e-mail ${values.email}`);
      const password = values.password ?? generatePassword();
      user.passwordHash = await hashPassword(password);
      // A new password signs the user out everywhere, as through the API: tokens of the old version are refused.
      user.credentialVersion = (user.credentialVersion ?? 0) + 1;
      user.updatedAt = new Date();
      await em.flush();
      print(`reset the password of ${user.email}\n`);
      if (!values.password) print(`password: ${password}\n`);
    } else if (command === 'backfill-reports') {
      const from = Date.parse(values.from ?? '');
      const to = Date.parse(values.to ?? '');
      if (!Number.isFinite(from) || !Number.isFinite(to) || to <= from)
        throw new UsageError('--from and --to: ISO 8601 instants, --to after --from');
      const materializer = new ReportMaterializer(storage, materializations, logger);
      const units = await materializer.backfill(new Date(from), new Date(to), values.organization);
      print(`rebuilt ${units} device-hours of ${new Date(from).toISOString()} .. ${new Date(to).toISOString()}\n`);
    } else {
      throw new UsageError(`unknown command ${command}`);
    }
  } finally {
    await storage.close();
    lock?.release();
  }
  process.stdout.write(lines.join(''));
}

/** The pid of the live process holding DATA_DIR (embedded storage), or undefined when nobody does. */
function dataDirHolder(config: Config): number | undefined {
  if (config.DATABASE_URL) return undefined;
  try {
    lockDataDir(config.DATA_DIR).release();
    return undefined;
  } catch (error) {
    if (error instanceof DataDirInUseError) return error.pid;
    throw error;
  }
}

/**
 * The running gateway changes the password, as `PATCH /api/v1/users/:id` does for anyone (audited, sockets of the
 * old password closed): the CLI signs a short-lived operator token naming the user by e-mail with the signing key
 * (JWT_SECRET, or DATA_DIR/jwt-secret), finds the user's id in the listing, and patches it.
 */
async function resetPasswordThroughApi(config: Config, url: string, email: string, password: string): Promise<void> {
  const tokens = new TokenService(loadJwtSecret(config), 120);
  const token = await tokens.sign({
    sub: 'operator',
    email: email.toLowerCase(),
    organization_uuid: '',
    role: 'admin',
    api_permission: 'read-write',
    operator: true,
  });
  const call = async (method: string, path: string, body?: unknown) => {
    let response: Response;
    try {
      response = await fetch(`${url}${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      });
    } catch (error) {
      const cause = (error as Error).message;
      throw new UsageError(`DATA_DIR is held by a running gateway, but none answers at ${url} (${cause}): pass its --url`);
    }
    const answer = (await response.json().catch(() => ({}))) as { message?: string; data?: { id: string; email: string }[] };
    if (!response.ok) throw new UsageError(`${method} ${path}: ${response.status} ${answer.message ?? ''}`.trim());
    return answer;
  };
  for (let page = 0; ; page += 1) {
    const { data = [] } = await call('GET', `/api/v1/users?size=1000&page=${page}`);
    const user = data.find((candidate) => candidate.email === email.toLowerCase());
    if (user) {
      await call('PATCH', `/api/v1/users/${user.id}`, { password });
      return;
    }
    if (data.length < 1000) throw new UsageError(`no user with e-mail ${email} (through the API, an administrator or user manager only)`);
  }
}

main(process.argv.slice(2)).catch((error) => {
  if (error instanceof UsageError || error instanceof ConfigError) {
    process.stderr.write(`${error.message}\n\n${usage}\n`);
    process.exit(2);
  }
  process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
