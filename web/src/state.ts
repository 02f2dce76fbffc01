import { createContext } from 'preact';
import { useContext } from 'preact/hooks';
import type { Config, Me } from './types';

export interface AppState {
  config: Config;
  me: Me;
  /** Replace the signed-in account (after a password change, for instance). */
  setMe: (me: Me | null) => void;
}

export const AppContext = createContext<AppState | null>(null);

export function useApp(): AppState {
  const s = useContext(AppContext);
  if (s === null) throw new Error('useApp outside the signed-in app');
  return s;
}
