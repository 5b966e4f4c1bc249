/**
 * The demo's people: a first name and a role, shown by the console as "Ana (nurse)". The first few are the
 * responders (the group the console routes from); the rest are staff, patients and visitors walking about.
 */
const FIRST_NAMES = [
  'Ana',
  'Ben',
  'Carmen',
  'David',
  'Elena',
  'Farid',
  'Grace',
  'Hugo',
  'Inés',
  'Jonas',
  'Kiri',
  'Lucía',
  'Marco',
  'Nadia',
  'Omar',
  'Paula',
  'Quentin',
  'Rosa',
  'Sami',
  'Tess',
  'Umar',
  'Vera',
  'Wen',
  'Ximena',
  'Yusuf',
  'Zoe',
  'Aitor',
  'Bea',
  'Chen',
  'Dolores',
  'Emil',
  'Fatima',
  'Gabriel',
  'Hana',
  'Ivan',
  'Julia',
  'Kofi',
  'Lena',
  'Mateo',
  'Noor',
  'Oscar',
  'Pilar',
  'Raúl',
  'Sofia',
  'Tomás',
  'Ursula',
  'Víctor',
  'Wanda',
  'Yara',
  'Zeno',
];
const RESPONDER_ROLES = ['nurse', 'doctor', 'security', 'nurse', 'porter'];
const OTHER_ROLES = ['patient', 'visitor', 'nurse', 'cleaner', 'patient', 'technician', 'visitor', 'pharmacist', 'porter', 'patient'];

/** The full name of person `index` (0-based); responders come first. Names repeat, with a number, past 50 people. */
export function demoPersonName(index: number, responders: number): string {
  const first = FIRST_NAMES[index % FIRST_NAMES.length]!;
  const round = Math.floor(index / FIRST_NAMES.length);
  const role =
    index < responders ? RESPONDER_ROLES[index % RESPONDER_ROLES.length]! : OTHER_ROLES[(index - responders) % OTHER_ROLES.length]!;
  return `${first}${round > 0 ? ` ${round + 1}` : ''} (${role})`;
}
