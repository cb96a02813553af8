// One entry per HTTP operation: what a reader of the document and a client generator need,
// declared once. document.ts turns these into OpenAPI paths; an endpoint is added by adding
// one entry to operations.ts (or admin-operations.ts).

import type { TSchema } from '@sinclair/typebox';
import type { ErrorCode } from '../errors/index.ts';
import type { ComponentName } from './components.ts';

export type SchemaUse = ComponentName | TSchema;

export interface ParameterSpec {
  name: string;
  in: 'path' | 'query' | 'header';
  required?: boolean;
  description?: string;
  schema: object;
  example: unknown;
}

export interface Operation {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  /** OpenAPI form, `{param}` */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tag: 'health' | 'business' | 'auth' | 'admin' | 'meta';
  /** none: public; bearer: business token; session: administrator session; bearerOrDevice: a
   * business token or a device session token (verify, GET /v1/me) */
  auth: 'none' | 'bearer' | 'session' | 'bearerOrDevice';
  /** state-changing administration call: X-CSRF-Token header and csrf_failed */
  csrf?: boolean;
  parameters?: ParameterSpec[];
  /** a JSON body */
  body?: { schema: SchemaUse; example: unknown };
  /** a body that is not JSON (verify's multipart): the OpenAPI requestBody as is */
  rawBody?: object;
  success: {
    status: '200' | '201' | '202' | '204';
    description: string;
    schema?: SchemaUse;
    example?: unknown;
    /** default application/json; several when the answer's type depends on the resource */
    contentType?: string | string[];
    headers?: Record<string, object>;
  };
  /** every error code the operation can answer besides internal_error (always listed) */
  errors: ErrorCode[];
  /** answers 422; the example shows a typical item */
  validation?: { description?: string; example: unknown };
  /** response headers by status, e.g. Retry-After on 409/429/503 */
  errorHeaders?: Partial<Record<string, Record<string, object>>>;
  /** other answers that are not error bodies (readiness's 503) */
  extraResponses?: Record<string, object>;
}

export const retryAfter = { 'Retry-After': { schema: { type: 'integer', minimum: 0 }, description: 'seconds to wait before retrying' } };
export const pathParam = (name: string, example: string, schema: object = { type: 'string' }, description?: string): ParameterSpec =>
  ({ name, in: 'path', required: true, schema, example, ...(description ? { description } : {}) });
export const moduleIdParam = pathParam('module_id', 'rgb_liveness', { $ref: '#/components/schemas/ModuleId' });
