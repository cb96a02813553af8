/** The service's version, as package.json says (a test keeps the two equal): compiled code
 * runs from dist/, where package.json is not beside it, so it is a constant. */
export const SERVICE_VERSION = '0.5.1';
