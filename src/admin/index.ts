// The surface of src/admin/: what the other folders of src/ may import from it.

export { bootstrapAdmin } from './bootstrap.ts';
export { CONSOLE_TYPES } from './console-types.ts';
export { detPlot, modelSetViews } from './model-sets.ts';
export { isModuleId, moduleView, moduleViews } from './modules.ts';
export { overview } from './overview.ts';
export { DEFAULT_DAYS, MAX_DAYS, MAX_ID_CHARS, TIME_RANGE_TEXT, auditOutcome, encodeCursor, parseAuditQuery, parseDailyQuery, parseListQuery, parsePageQuery } from './page-query.ts';
export { GrantBodySchema, GrantSchema, ModuleIdSchema, ModulePatchSchema, PeriodSchema, RoleSchema, SettlementResolveSchema, TokenCreateSchema, TokenPatchSchema, UserCreateSchema, UserPatchSchema } from './schemas.ts';
export { DuplicateTokenNameError, RevokedTokenError, createToken, duplicateGrantIndex, listTokenViews, patchToken, removeGrant, revokeToken, searchTokenViews, setGrant, tokenDetail, withTokenNames } from './tokens.ts';
export { LastAdminError, addUser, listUserViews, patchUser, searchUserViews } from './users.ts';
export * as adminSchemas from './schemas.ts';
