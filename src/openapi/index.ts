// The OpenAPI document served at /openapi.json. To describe a new endpoint, add one entry to
// operations.ts or admin-operations.ts (and name its shapes in components.ts).
export { buildOpenApi } from './document.ts';
export type { Operation, ParameterSpec, SchemaUse } from './operation.ts';
