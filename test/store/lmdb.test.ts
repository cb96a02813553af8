import t from 'tap';
import { LmdbBackend } from '../../src/store/lmdb/index.ts';
import { tempDir } from '../helpers/server.ts';
import { storeContract } from './contract.ts';

const store = LmdbBackend.open(tempDir());
t.teardown(() => store.close());
storeContract(t, store);
