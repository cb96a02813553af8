export * from './business-token.ts';
export * from './password.ts';
