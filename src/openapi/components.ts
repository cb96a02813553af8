// Named schemas of the document, from the TypeBox schemas the service validates with and the
// response shapes in responses.ts, plus the error and issue catalogues. Register a shape here
// to give it a name; operations may also use a TypeBox schema inline.

import { Type, type TSchema } from '@sinclair/typebox';
import { adminSchemas as admin } from '../admin/index.ts';
import { LoginSchema, SessionSchema } from '../auth/index.ts';
import { ERRORS, ISSUE_TYPES } from '../errors/index.ts';
import { BatchEnvelopeSchema, CapturePacketSchema, FrameSchema, ImageDescriptorSchema, MetadataSchema } from '../packets/index.ts';
import * as r from './responses.ts';
import { SessionCreateSchema } from '../sessions/index.ts';
import * as sessions from './session-responses.ts';
import { MODULE_METADATA, PACKETS } from './verify-metadata.ts';

// plain string enums rather than unions of literals: what client generators turn into enums
export const ErrorCodeSchema = Type.Unsafe<string>({ type: 'string', enum: Object.keys(ERRORS), description: 'every error.code the service answers' });
export const IssueTypeSchema = Type.Unsafe<string>({ type: 'string', enum: [...ISSUE_TYPES], description: 'every type a 422 detail item carries' });

export const COMPONENTS = {
  ErrorCode: ErrorCodeSchema,
  IssueType: IssueTypeSchema,
  ErrorBody: r.ErrorBodyOf(ErrorCodeSchema),
  ModuleId: admin.ModuleIdSchema,
  Period: admin.PeriodSchema,
  Role: admin.RoleSchema,
  ValidationIssue: r.ValidationIssueOf(IssueTypeSchema),
  ValidationErrorBody: r.ValidationErrorBodyOf(IssueTypeSchema),
  ImageDescriptor: ImageDescriptorSchema,
  Frame: FrameSchema,
  // the service validates with MetadataSchema (src/packets/schemas.ts) and ties modes to
  // modules in rules.ts; the document states that tie, one schema per module
  CapturePacket: CapturePacketSchema,
  BatchEnvelope: BatchEnvelopeSchema,
  Metadata: Type.Unsafe({
    description: `${MetadataSchema.description} The schema of the path module applies (x-module-id).`,
    anyOf: [{ $ref: '#/components/schemas/RgbLivenessMetadata' }, { $ref: '#/components/schemas/ColorLivenessMetadata' }],
  }),
  CapturePacketRgbSingle: PACKETS.rgb_single,
  CapturePacketRgbSequence: PACKETS.rgb_sequence,
  CapturePacketColor: PACKETS.color,
  RgbLivenessMetadata: MODULE_METADATA.rgb_liveness,
  ColorLivenessMetadata: MODULE_METADATA.color_liveness,
  UsageRecord: r.UsageRecord,
  ResultRecord: r.ResultRecord,
  VerifyResponse: r.VerifyResponse,
  MeResponse: r.MeResponse,
  ModulesResponse: r.ModulesResponse,
  SessionCreate: SessionCreateSchema,
  SessionCreated: sessions.SessionCreated,
  SessionStatus: sessions.SessionStatus,
  SessionVerification: sessions.SessionVerification,
  SessionMe: sessions.SessionMe,
  ActiveSessionList: Type.Object({ sessions: Type.Array(sessions.ActiveSession) }),
  HealthLive: r.HealthLive,
  HealthReady: r.HealthReady,
  Jwks: r.Jwks,
  Login: LoginSchema,
  Session: SessionSchema,
  AdminModule: r.AdminModule,
  AdminModuleList: Type.Object({ modules: Type.Array(r.AdminModule) }),
  ModulePatch: admin.ModulePatchSchema,
  User: r.User,
  UserList: r.UserList,
  UserCreate: admin.UserCreateSchema,
  UserPatch: admin.UserPatchSchema,
  Token: r.Token,
  TokenList: r.TokenList,
  UsageDaily: r.UsageDaily,
  TokenDetail: r.TokenDetail,
  TokenCreated: r.TokenCreated,
  TokenCreate: admin.TokenCreateSchema,
  TokenPatch: admin.TokenPatchSchema,
  Grant: admin.GrantSchema,
  GrantBody: admin.GrantBodySchema,
  LedgerEntry: r.LedgerEntry,
  LedgerPage: r.Page(r.LedgerEntry),
  AuditRecord: r.AuditRecord,
  AuditPage: r.Page(r.AuditRecord),
  Settlement: r.Settlement,
  SettlementList: Type.Object({ settlements: Type.Array(r.Settlement) }),
  Overview: r.Overview,
  StoredResults: r.StoredResults,
  ModelSetList: r.ModelSetList,
  SettlementResolve: admin.SettlementResolveSchema,
} satisfies Record<string, TSchema>;

export type ComponentName = keyof typeof COMPONENTS;
