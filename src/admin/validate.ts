import type { Static, TSchema } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { ValidationFailure } from '../errors/index.ts';
import { addSchemaErrors, IssueList } from '../packets/issues.ts';

export type Parser<T extends TSchema> = (body: unknown) => Static<T>;

/** Compiles a body schema once; the parser throws a 422 with every issue, loc under "body".
 * The schemas are the ones the OpenAPI document is built from. */
export function bodyParser<T extends TSchema>(schema: T): Parser<T> {
  const check = TypeCompiler.Compile(schema);
  return (body) => {
    if (check.Check(body)) return body;
    const issues = new IssueList();
    if (body === undefined) issues.issue(['body'], 'missing', 'Field required');
    else addSchemaErrors(check.Errors(body), ['body'], body, issues);
    if (issues.length === 0) issues.issue(['body'], 'model_type', 'Input does not match the schema');
    // a rejected password is still a password: never echo it back
    for (const item of issues.items) if (item.loc[item.loc.length - 1] === 'password') delete item.input;
    throw new ValidationFailure(issues.items);
  };
}
