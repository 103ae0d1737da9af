// What every command gets: the configuration (read once, as the gateway reads it), the output
// mode, and a client for the running gateway.
import { loadConfig, ConfigError, type Config } from '../config.js';
import { GatewayClient, gatewayUrl, loopbackServername, trustedCas } from './client.js';
import { managementKeyOf, type KeySources } from './credentials.js';
import { CliError, EXIT } from './errors.js';
import { Output } from './output.js';

export interface GlobalOptions extends KeySources { json?: boolean; url?: string }

export class Ctx {
  private cfg: Config | undefined;
  private key: Promise<string> | undefined;
  constructor(private readonly opts: GlobalOptions, private readonly env: NodeJS.ProcessEnv = process.env) {}

  config(): Config {
    if (!this.cfg) {
      try {
        this.cfg = loadConfig(this.env);
      } catch (e) {
        if (e instanceof ConfigError) throw new CliError(EXIT.USAGE, e.message);
        throw e;
      }
    }
    return this.cfg;
  }

  get out(): Output {
    return new Output(this.opts.json === true);
  }

  client(): GatewayClient {
    const config = this.config();
    const override = this.opts.url ?? this.env.TAGW_URL;
    const url = gatewayUrl(config, override);
    return new GatewayClient(url, () => (this.key ??= managementKeyOf(this.opts, config)), trustedCas(config, this.env), loopbackServername(config, url, override));
  }
}
