/**
 * The settings of a command that is a client of a running tronwatch (`tronwatch mcp`,
 * `tronwatch listen`): TRONWATCH_URL and TRONWATCH_API_KEY. They are the client's, not the
 * service's configuration (src/config.ts).
 */

/** Where the service is and the key to call it with. */
export interface ClientSettings {
  /** TRONWATCH_URL: the service's base URL, no trailing slash (default http://127.0.0.1:8080). */
  url: string;
  /** TRONWATCH_API_KEY: a `tw_live_…` or `tw_test_…` key (required). */
  apiKey: string;
}

/** Read and check the settings. @throws Error naming the variable at fault (never its value). */
export function clientSettings(env: NodeJS.ProcessEnv): ClientSettings {
  const apiKey = env.TRONWATCH_API_KEY?.trim() ?? '';
  if (apiKey === '') {
    throw new Error('TRONWATCH_API_KEY is unset: set it to an API key (tw_live_…)');
  }
  const url = env.TRONWATCH_URL?.trim() || 'http://127.0.0.1:8080';
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new Error(
      'TRONWATCH_URL is not a URL: set it to the service, e.g. https://tronwatch.example.com',
    );
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new Error('TRONWATCH_URL must be an http:// or https:// URL');
  }
  return { url: url.replace(/\/+$/, ''), apiKey };
}
